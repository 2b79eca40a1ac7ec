"""Issue 12 (part B): every NeMo checkpoint format into one native bundle.

The tiny checkpoints are written as NeMo writes them (``nemo_fixtures``; NeMo itself is not
installed: 2.3 GB of dependencies). One set of random weights, saved as a ``.nemo`` tar, a
gzipped ``.nemo``, the unpacked folder, a Lightning ``.ckpt``, a ``.safetensors`` export and a
distributed checkpoint (one process, and two ranks with sharded tensors), converts to one bundle:
the same ``model.safetensors`` bytes and the same config but for the provenance.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest
import torch

import nemo_fixtures as nf
from cli_checks import one_line_error

pytest.importorskip("sentencepiece")
pytest.importorskip("omegaconf")  # the Lightning fixtures pickle real OmegaConf objects, as NeMo's do


@pytest.fixture(scope="module")
def sp_model(tmp_path_factory) -> Path:
    return nf.train_sentencepiece(tmp_path_factory.mktemp("sp"))


@pytest.fixture(scope="module")
def vocab(sp_model) -> list[str]:
    return nf.pieces(sp_model)


def _source(kind_of_file: str, folder: Path, cfg: dict, state: dict, sp: Path) -> Path:
    """One checkpoint of ``cfg`` + ``state`` in the format named; the tokenizer where NeMo users keep it."""
    if kind_of_file == "nemo":
        return nf.write_nemo(folder / "m.nemo", cfg, state, sp)
    if kind_of_file == "nemo.gz":
        return nf.write_nemo(folder / "m.nemo", cfg, state, sp, gz=True)
    if kind_of_file == "unpacked":
        archive = nf.write_nemo(folder / "m.nemo", cfg, state, sp)
        out = folder / "unpacked"
        with tarfile.open(archive) as tar:
            tar.extractall(out, filter="data")
        archive.unlink()
        return out
    if kind_of_file == "ckpt":
        shutil.copy2(sp, folder / "tokenizer.model")
        return nf.write_lightning(folder / "m.ckpt", cfg, state)
    if kind_of_file == "safetensors":
        return nf.write_safetensors(folder / "st", cfg, state, sp)
    if kind_of_file == "distcp":
        out = nf.write_distcp(folder / "dcp", cfg, state)
        shutil.copy2(sp, out / "tokenizer.model")
        return out
    raise AssertionError(kind_of_file)


FORMATS = ("nemo", "nemo.gz", "unpacked", "ckpt", "safetensors", "distcp")
CONVERTERS = {"nemo": "nemo", "nemo.gz": "nemo", "unpacked": "nemo", "ckpt": "nemo-lightning",
              "safetensors": "nemo-safetensors", "distcp": "nemo-distcp"}


def _bundle_parts(bundle: Path) -> tuple[bytes, dict]:
    config = json.loads((bundle / "oasr_config.json").read_text())
    config.pop("provenance")
    return (bundle / "model.safetensors").read_bytes(), config


@pytest.mark.parametrize("kind", ["ctc", "hybrid"])
def test_every_format_gives_the_same_bundle(kind, sp_model, vocab, tmp_path):
    from oasr.conversion.run import convert_one

    cfg = nf.nemo_config(kind, vocab, "/data/tokenizers/tokenizer.model")
    state = nf.nemo_state_dict(cfg)
    parts = {}
    for fmt in FORMATS:
        folder = tmp_path / fmt
        folder.mkdir()
        result = convert_one(_source(fmt, folder, cfg, state, sp_model), tmp_path / f"out-{fmt}")
        assert result.converter == CONVERTERS[fmt], fmt
        assert sorted(result.dropped) == ["preprocessor.featurizer.fb", "preprocessor.featurizer.window"], fmt
        assert not result.notes, (fmt, result.notes)
        parts[fmt] = _bundle_parts(tmp_path / f"out-{fmt}")
        assert (tmp_path / f"out-{fmt}" / "tokenizer" / "tokenizer.model").read_bytes() == sp_model.read_bytes()
    weights, config = parts["nemo"]
    for fmt, (w, c) in parts.items():
        assert c == config, fmt
        assert w == weights, f"{fmt}: model.safetensors differs from the .nemo's"
    assert config["tokenizer"]["kind"] == "sentencepiece"
    assert config["features"]["kind"] == "nemo_logmel" and config["features"]["options"]["win_length"] == 400
    assert config["decoding"]["blank_id"] == len(vocab)
    provenance = json.loads((tmp_path / "out-ckpt" / "oasr_config.json").read_text())["provenance"]
    assert provenance["options"]["source_class"] == cfg["target"]


def test_sharded_distributed_checkpoint_matches_the_single_file(sp_model, vocab, tmp_path):
    """Two ranks (gloo, CPU) save FSDP-style row shards of every matrix; read on one process,
    the bundle's bytes equal those of the ``.nemo`` of the same weights."""
    from oasr.conversion.run import convert_one
    from oasr.io.nemo.distcp import read_metadata

    cfg = nf.nemo_config("tdt", vocab, "/data/tokenizers/tokenizer.model")
    state = nf.nemo_state_dict(cfg, seed=3)
    folder = nf.write_distcp_sharded(tmp_path / "dcp", cfg, state, world=2)
    assert sorted(p.name for p in folder.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    chunks = read_metadata(folder).state_dict_metadata["state_dict.encoder.layers.0.feed_forward1.linear1.weight"].chunks
    assert len(chunks) == 2  # one tensor, stored as two ranks' halves
    shutil.copy2(sp_model, folder / "tokenizer.model")
    convert_one(folder, tmp_path / "from-dcp")
    convert_one(nf.write_nemo(tmp_path / "m.nemo", cfg, state, sp_model), tmp_path / "from-nemo")
    assert _bundle_parts(tmp_path / "from-dcp") == _bundle_parts(tmp_path / "from-nemo")


# -- hostile and broken archives ---------------------------------------------------------------


def _tar_with(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], gz: bool = False) -> Path:
    with tarfile.open(path, "w:gz" if gz else "w:") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info, None


HOSTILE = {
    "climbs out": ([_file("./model_config.yaml"), _file("./../evil")], "climbs out of its folder"),
    "absolute": ([_file("./model_config.yaml"), _file("/tmp/oasr-evil-abs")], "is an absolute path"),
    "symlink": ([_special("./model_weights.ckpt", tarfile.SYMTYPE, "../../evil"), _file("./model_config.yaml")], "symbolic link"),
    "hard link": ([_file("./model_config.yaml"), _special("./model_weights.ckpt", tarfile.LNKTYPE, "/etc/passwd")], "hard link"),
    "device": ([_file("./model_config.yaml"), _special("./model_weights.ckpt", tarfile.CHRTYPE)], "a device"),
    "twice": ([_file("./model_config.yaml"), _file("./model_config.yaml", b"y")], "appears twice"),
}


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """The temporary folder the archive is extracted into lies here, so leftovers can be seen."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_member_is_refused_and_nothing_is_written(case, cli, tmp_path, private_tmp):
    members, needle = HOSTILE[case]
    src = _tar_with(tmp_path / "bad.nemo", members)
    code, _, err = cli("convert", src, tmp_path / "out")
    one_line_error(code, err, needle)
    assert not (tmp_path / "evil").exists() and not Path("/tmp/oasr-evil-abs").exists()
    assert not list(private_tmp.iterdir()), "the extraction folder was left behind"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("gz", [False, True], ids=["tar", "tar.gz"])
def test_truncated_archive(gz, cli, sp_model, vocab, tmp_path, private_tmp):
    cfg = nf.nemo_config("ctc", vocab, None)
    whole = nf.write_nemo(tmp_path / "whole.nemo", cfg, nf.nemo_state_dict(cfg), sp_model, gz=gz)
    data = whole.read_bytes()
    cut = tmp_path / "cut.nemo"
    cut.write_bytes(data[: len(data) * 2 // 3])
    code, _, err = cli("convert", cut, tmp_path / "out")
    one_line_error(code, err, "truncated")
    assert not list(private_tmp.iterdir())
    assert not (tmp_path / "out").exists()


def test_compressed_member_that_inflates_past_the_limit(cli, tmp_path, private_tmp):
    """Sizes are refused from the tar index, before anything is extracted."""
    src = _tar_with(tmp_path / "bomb.nemo", [_file("./model_config.yaml"), _file("./model_weights.ckpt", bytes(8 << 20))], gz=True)
    assert src.stat().st_size * 100 < 8 << 20
    code, _, err = cli("convert", src, tmp_path / "out")
    one_line_error(code, err, "more than 100 x")
    assert not list(private_tmp.iterdir())


def test_archive_without_weights_names_what_it_holds(cli, tmp_path, private_tmp):
    src = _tar_with(tmp_path / "cfg-only.nemo", [_file("./model_config.yaml", b"target: x\n")])
    code, _, err = cli("convert", src, tmp_path / "out")
    one_line_error(code, err, "holds no model_weights.ckpt")


def test_unsupported_class_is_named_never_imported(cli, sp_model, vocab, tmp_path):
    cfg = nf.nemo_config("ctc", vocab, None)
    cfg["target"] = "nemo.collections.asr.models.aed_multitask_models.EncDecMultiTaskModel"
    src = nf.write_nemo(tmp_path / "canary.nemo", cfg, nf.nemo_state_dict(nf.nemo_config("ctc", vocab, None)), sp_model)
    code, _, err = cli("convert", src, tmp_path / "out")
    one_line_error(code, err, "EncDecMultiTaskModel is not a model oasr runs")


def test_a_filterbank_other_than_the_config_says_is_refused(cli, sp_model, vocab, tmp_path):
    cfg = nf.nemo_config("ctc", vocab, None)
    state = nf.nemo_state_dict(cfg)
    state["preprocessor.featurizer.fb"] = state["preprocessor.featurizer.fb"] * 1.01
    code, _, err = cli("convert", nf.write_nemo(tmp_path / "m.nemo", cfg, state, sp_model), tmp_path / "out")
    one_line_error(code, err, "preprocessor.featurizer.fb differs")


def test_a_tensor_the_model_lacks_is_not_dropped(cli, sp_model, vocab, tmp_path):
    cfg = nf.nemo_config("ctc", vocab, None)
    state = nf.nemo_state_dict(cfg)
    state["preprocessor.featurizer.extra"] = torch.zeros(3)
    code, _, err = cli("convert", nf.write_nemo(tmp_path / "m.nemo", cfg, state, sp_model), tmp_path / "out")
    one_line_error(code, err, "preprocessor.featurizer.extra")


# -- pickles: foreign objects stay data --------------------------------------------------------


class _Touch:
    """A foreign class (as a Lightning callback's would be): built for real, it creates ``marker``."""

    def __init__(self, marker: str):
        Path(marker).touch()

    def __reduce__(self):
        return (type(self), (self.marker,))


def _foreign_object(monkeypatch, marker: Path) -> _Touch:
    """An instance of ``_Touch`` pickled under a module name oasr has never heard of."""
    import sys
    import types

    module = types.ModuleType("trainer_plugin_callbacks")
    _Touch.__module__ = module.__name__
    module._Touch = _Touch
    monkeypatch.setitem(sys.modules, module.__name__, module)
    obj = object.__new__(_Touch)
    obj.marker = str(marker)
    return obj


class _Payload:
    """Unpickled for real, this would run a shell command (os.system: a module torch blocks)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_lightning_objects_are_rebuilt_inert(sp_model, vocab, tmp_path, monkeypatch):
    """A callback object that would create a file when built only becomes a record."""
    from oasr.conversion.run import convert_one

    marker = tmp_path / "executed"
    cfg = nf.nemo_config("ctc", vocab, None)
    ckpt = nf.lightning_checkpoint(cfg, nf.nemo_state_dict(cfg))
    ckpt["callbacks"]["Evil"] = _foreign_object(monkeypatch, marker)
    torch.save(ckpt, tmp_path / "m.ckpt")
    shutil.copy2(sp_model, tmp_path / "tokenizer.model")
    result = convert_one(tmp_path / "m.ckpt", tmp_path / "out")
    assert result.converter == "nemo-lightning"
    assert not marker.exists()


def test_lightning_checkpoint_naming_a_blocked_module_is_refused(cli, vocab, tmp_path):
    marker = tmp_path / "executed"
    cfg = nf.nemo_config("ctc", vocab, None)
    ckpt = nf.lightning_checkpoint(cfg, nf.nemo_state_dict(cfg))
    ckpt["callbacks"]["Evil"] = _Payload(marker)
    torch.save(ckpt, tmp_path / "m.ckpt")
    code, _, err = cli("convert", tmp_path / "m.ckpt", tmp_path / "out")
    one_line_error(code, err, "refusing to unpickle")
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_distcp_metadata_is_read_by_a_closed_unpickler(cli, sp_model, vocab, tmp_path):
    cfg = nf.nemo_config("ctc", vocab, None)
    folder = nf.write_distcp(tmp_path / "dcp", cfg, nf.nemo_state_dict(cfg))
    marker = tmp_path / "executed"
    (folder / ".metadata").write_bytes(pickle.dumps(_Payload(marker)))
    code, _, err = cli("convert", folder, tmp_path / "out")
    one_line_error(code, err, "system beyond torch's checkpoint metadata")
    assert not marker.exists()


def test_truncated_distcp_shard(cli, sp_model, vocab, tmp_path):
    cfg = nf.nemo_config("ctc", vocab, None)
    folder = nf.write_distcp(tmp_path / "dcp", cfg, nf.nemo_state_dict(cfg))
    shard = folder / "__0_0.distcp"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    code, _, err = cli("convert", folder, tmp_path / "out")
    one_line_error(code, err, "truncated")


# -- detection ---------------------------------------------------------------------------------


def test_detection_claims_only_nemo_sources(sp_model, vocab, tmp_path):
    from oasr.conversion.detect import detect

    cfg = nf.nemo_config("ctc", vocab, None)
    state = nf.nemo_state_dict(cfg)
    plain = tmp_path / "plain.ckpt"
    torch.save({"state_dict": state, "hyper_parameters": {"lr": 0.1}}, plain)  # Lightning, not NeMo
    (tmp_path / "not-a-tar.nemo").write_bytes(b"\0" * 1024)
    nemo_claims = lambda p: [c.converter.name for c in detect(p) if c.converter.name.startswith("nemo")]  # noqa: E731
    assert nemo_claims(plain) == []
    assert nemo_claims(tmp_path / "not-a-tar.nemo") == []
    assert nemo_claims(nf.write_lightning(tmp_path / "m.ckpt", cfg, state)) == ["nemo-lightning"]
    assert nemo_claims(nf.write_nemo(tmp_path / "m.nemo", cfg, state, sp_model)) == ["nemo"]


# -- the converted bundle runs -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ctc", "rnnt", "tdt", "hybrid"])
def test_bundle_encoder_equals_the_model_on_the_same_weights(kind, sp_model, vocab, tmp_path, jfk_wav):
    import soundfile as sf

    import oasr
    from oasr.features.nemo_mel import nemo_log_mel
    from oasr.models.fastconformer import FastConformer
    from oasr_converters.nemo import fastconformer_config

    cfg = nf.nemo_config(kind, vocab, None)
    state = nf.nemo_state_dict(cfg, seed=1)
    bundle = tmp_path / "bundle"
    oasr.convert([nf.write_nemo(tmp_path / "m.nemo", cfg, state, sp_model)], bundle)
    loaded = oasr.load_pretrained(bundle, device="cpu", dtype="float32", cache=False)

    direct = FastConformer(fastconformer_config(nf.resolved(cfg))).eval()
    missing, unexpected = direct.load_state_dict({k: v for k, v in state.items() if not k.startswith("preprocessor.")}, strict=True)
    audio, _ = sf.read(jfk_wav, dtype="float32")
    features = nemo_log_mel(torch.from_numpy(audio), loaded.feature_spec)[None]
    lengths = torch.tensor([features.shape[-1]])
    with torch.no_grad():
        ours, ours_len = loaded.model.encode(features, lengths)
        ref, ref_len = direct.encode(features, lengths)
    assert torch.equal(ours_len, ref_len)
    assert (ours - ref).abs().max().item() <= 1e-6


@pytest.mark.parametrize("kind", ["ctc", "char_ctc", "tdt", "hybrid"])
def test_transcribe_runs_on_a_converted_bundle(kind, cli, sp_model, vocab, tmp_path, jfk_wav):
    labels = nf.CHAR_LABELS if kind == "char_ctc" else vocab
    cfg = nf.nemo_config(kind, labels, None)
    bundle = tmp_path / "bundle"
    code, _, err = cli("convert", nf.write_nemo(tmp_path / "m.nemo", cfg, nf.nemo_state_dict(cfg, seed=2), sp_model), bundle)
    assert code == 0, err
    import soundfile as sf

    audio, rate = sf.read(jfk_wav, dtype="float32")
    clip = tmp_path / "clip.wav"
    sf.write(clip, audio[: 3 * rate], rate)  # random weights emit symbols at every frame: keep it short
    code, out, err = cli("transcribe", "-m", bundle, "-f", clip, "-F", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["provenance"]["architecture"] == "fastconformer"
    assert isinstance(result["text"], str)


# -- fuzzing: a damaged archive or metadata is an OasrError, nothing else ----------------------


@pytest.fixture(scope="module")
def small_nemo(sp_model, vocab, tmp_path_factory) -> bytes:
    cfg = nf.nemo_config("ctc", vocab, None)
    return nf.write_nemo(tmp_path_factory.mktemp("fuzz") / "m.nemo", cfg, nf.nemo_state_dict(cfg), sp_model).read_bytes()


def test_damaged_archives_raise_oasr_errors(small_nemo, tmp_path):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from oasr.errors import OasrError
    from oasr_converters.nemo_archive import NemoArchiveConverter

    headers = [i for i in range(0, len(small_nemo), 512) if small_nemo[i + 257 : i + 262] == b"ustar"]

    @settings(max_examples=30, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.sampled_from(headers), st.integers(0, 511), st.integers(0, 255)), min_size=1, max_size=4))
    def check(edits):
        data = bytearray(small_nemo)
        for header, offset, value in edits:  # header fields: names, sizes, types, checksums
            data[header + offset] = value
        path = tmp_path / "m.nemo"
        path.write_bytes(bytes(data))
        converter = NemoArchiveConverter(path)
        try:
            converter.convert()
        except OasrError:
            pass
        finally:
            converter.close()

    check()
