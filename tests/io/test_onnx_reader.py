"""runtime/io/onnx.py: tensors and graph of an ONNX file read as data; corrupt or unsafe files refused."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from oasr.errors import ConversionError, InputError, OasrError
from oasr.io.onnx import read_onnx

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from .test_fuzz_readers import fuzz  # noqa: E402


def _linear_model(weight: np.ndarray) -> onnx.ModelProto:
    """y = x @ W + b, with b as a Constant node, the way exporters write a linear layer."""
    w = numpy_helper.from_array(weight, name="onnx::MatMul_7")
    bias = helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(np.arange(3, dtype=np.float32)))
    graph = helper.make_graph(
        [bias, helper.make_node("MatMul", ["x", "onnx::MatMul_7"], ["xw"], name="/proj/MatMul"),
         helper.make_node("Add", ["xw", "b"], ["y"], name="/proj/Add")],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        initializer=[w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="test")
    model.metadata_props.add(key="voice", value="x")
    return model


def test_tensors_nodes_and_links(tmp_path):
    weight = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    path = tmp_path / "m.onnx"
    onnx.save(_linear_model(weight), path)
    g = read_onnx(path)
    assert g.opset == 17 and g.metadata == {"voice": "x"} and g.inputs == ("x",) and g.outputs == ("y",)
    assert torch.equal(g.tensor("onnx::MatMul_7"), torch.from_numpy(weight))
    assert torch.equal(g.tensor("b"), torch.arange(3, dtype=torch.float32))
    (user,) = g.consumers("onnx::MatMul_7")
    assert user.op_type == "MatMul" and user.name == "/proj/MatMul"
    assert g.producer("y").op_type == "Add"
    with pytest.raises(ConversionError, match="no tensor 'missing'"):
        g.tensor("missing")


def test_external_data_outside_the_folder_is_refused(tmp_path):
    weight = np.ones((4, 3), np.float32)
    model = _linear_model(weight)
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../secret.bin"
    (tmp_path / "secret.bin").write_bytes(weight.tobytes())
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(ConversionError, match="external data"):
        read_onnx(path)


def test_missing_empty_and_corrupt_files(tmp_path):
    with pytest.raises(InputError):
        read_onnx(tmp_path / "absent.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        read_onnx(tmp_path / "empty.onnx")
    (tmp_path / "text.onnx").write_text("not a model at all\n")
    with pytest.raises(ConversionError, match="not a readable ONNX model|no graph"):
        read_onnx(tmp_path / "text.onnx")


def test_without_the_onnx_package_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    (tmp_path / "m.onnx").write_bytes(b"x")
    with pytest.raises(InputError, match=r"oasr-toolchain\[onnx\]"):
        read_onnx(tmp_path / "m.onnx")


@fuzz(200)
@given(data=st.data())
def test_fuzzed_bytes_load_or_raise_an_oasr_error(tmp_path, data):
    good = _linear_model(np.ones((4, 3), np.float32)).SerializeToString()
    cut = data.draw(st.integers(0, len(good)))
    flip = data.draw(st.lists(st.tuples(st.integers(0, len(good) - 1), st.integers(0, 255)), max_size=6))
    raw = bytearray(good[:cut] if data.draw(st.booleans()) else good)
    for i, v in flip:
        if i < len(raw):
            raw[i] = v
    path = tmp_path / "f.onnx"
    path.write_bytes(bytes(raw))
    try:
        read_onnx(path)
    except OasrError:
        pass
