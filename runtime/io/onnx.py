"""The weights and the graph of an ONNX file, read as data: the graph is never run.

Converters need two things from an export: its tensors (initializers, and the values of Constant
nodes, which exporters use for small weights) and enough of the graph to name them, since
exporters leave many weights anonymous (``onnx::MatMul_123``) and store linear weights transposed
as the MatMul consumes them. ``read_onnx`` returns both; naming policy stays in each converter.

External data (weights in side files) is read only from files inside the model's folder.
The ``onnx`` package is an optional extra, needed only to convert.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..errors import ConversionError, InputError
from .files import inside

MAX_ONNX_BYTES = 4 << 30  # a speech model's export; larger is refused before parsing


@dataclass(frozen=True)
class OnnxNode:
    op_type: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict


@dataclass
class OnnxGraph:
    path: Path
    opset: int
    made_by: str  # the exporter's name and version
    metadata: dict[str, str]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    initializers: dict[str, torch.Tensor]
    constants: dict[str, torch.Tensor]  # Constant nodes' tensor values, by output name
    nodes: list[OnnxNode]
    _consumers: dict[str, list[OnnxNode]] = field(default_factory=dict, repr=False)
    _producers: dict[str, OnnxNode] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    self._consumers.setdefault(name, []).append(node)
            for name in node.outputs:
                self._producers[name] = node

    def consumers(self, value: str) -> list[OnnxNode]:
        """The nodes that take ``value`` as an input, in graph order."""
        return self._consumers.get(value, [])

    def producer(self, value: str) -> OnnxNode | None:
        return self._producers.get(value)

    def tensor(self, name: str) -> torch.Tensor:
        """An initializer or a Constant node's value; a ConversionError names what is missing."""
        if name in self.initializers:
            return self.initializers[name]
        if name in self.constants:
            return self.constants[name]
        raise ConversionError(f"{self.path.name}: the graph has no tensor {name!r}")


def _onnx():
    from ..extras import require

    return require("onnx", "onnx", "reading ONNX files")


def _to_torch(array: np.ndarray) -> torch.Tensor:
    # A copy: numpy_helper may return views of the protobuf's bytes, which are freed with it.
    return torch.from_numpy(np.array(array, copy=True))


def _attribute(onnx, attr):
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, onnx.TensorProto):
        return _to_torch(onnx.numpy_helper.to_array(value))
    if isinstance(value, list):
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
    if isinstance(value, (int, float, str)):
        return value
    return None  # subgraphs and other kinds: converters never need them


def _check_external_data(onnx, model, folder: Path, label: str) -> None:
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    for tensor in _get_all_tensors(model):
        if uses_external_data(tensor):
            location = {e.key: e.value for e in tensor.external_data}.get("location", "")
            inside(folder, location, what=f"{label}: external data of tensor {tensor.name!r}",
                   error=ConversionError)


def read_onnx(path: str | Path) -> OnnxGraph:
    """Parse an ONNX file into its tensors and nodes; corrupt or unsafe files raise an OasrError."""
    onnx = _onnx()
    path = Path(path)
    label = path.name
    try:
        size = path.stat().st_size
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from None
    if size == 0:
        raise InputError(f"{path}: empty file")
    if size > MAX_ONNX_BYTES:
        raise ConversionError(f"{label}: {size} bytes is larger than any speech model's ONNX export")
    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and friends: the bytes are not an ONNX model
        raise ConversionError(f"{label}: not a readable ONNX model ({type(e).__name__})") from None
    if not model.HasField("graph"):
        raise ConversionError(f"{label}: not an ONNX model (no graph)")
    _check_external_data(onnx, model, path.parent, label)
    try:
        onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
    except (OSError, ValueError) as e:
        raise ConversionError(f"{label}: external data unreadable: {e}") from None

    graph = model.graph
    try:
        initializers = {t.name: _to_torch(onnx.numpy_helper.to_array(t)) for t in graph.initializer}
        nodes, constants = [], {}
        for n in graph.node:
            attrs = {a.name: _attribute(onnx, a) for a in n.attribute}
            nodes.append(OnnxNode(n.op_type, n.name, tuple(n.input), tuple(n.output), attrs))
            if n.op_type == "Constant" and isinstance(attrs.get("value"), torch.Tensor):
                constants[n.output[0]] = attrs["value"]
    except (ValueError, TypeError, KeyError) as e:
        raise ConversionError(f"{label}: a tensor or node is malformed: {e}") from None
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    return OnnxGraph(
        path=path,
        opset=int(opset),
        made_by=f"{model.producer_name} {model.producer_version}".strip(),
        metadata={p.key: p.value for p in model.metadata_props},
        inputs=tuple(i.name for i in graph.input if i.name not in initializers),
        outputs=tuple(o.name for o in graph.output),
        initializers=initializers,
        constants=constants,
        nodes=nodes,
    )
