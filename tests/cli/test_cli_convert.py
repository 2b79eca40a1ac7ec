"""`oasr convert` / `oasr inspect` from the command line: reports, idempotence, atomicity, bad input."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from tiny_models import write_hf_config_full, write_openai_pt
from cli_checks import one_line_error as _one_line_error




def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def pt(tmp_path) -> Path:
    return write_openai_pt(tmp_path / "tiny.pt")


def test_convert_then_skip_then_force(cli, pt, tmp_path):
    dst = tmp_path / "out"
    code, out, err = cli("convert", pt, dst)
    assert code == 0, err
    assert out.startswith("converted") and "openai-whisper" in out
    first = _snapshot(dst)
    code, out, _ = cli("convert", pt, dst)
    assert code == 0 and out.startswith("skipped") and "up to date" in out
    assert _snapshot(dst) == first
    code, out, _ = cli("convert", "--force", pt, dst)
    assert code == 0 and out.startswith("converted")
    code, out, _ = cli("convert", "--dtype", "float16", pt, dst)
    assert code == 0 and out.startswith("converted") and "float16" in out


def test_changed_source_is_reconverted(cli, pt, tmp_path):
    dst = tmp_path / "out"
    assert cli("convert", pt, dst)[0] == 0
    write_openai_pt(pt, seed=1)
    code, out, _ = cli("convert", pt, dst)
    assert code == 0 and out.startswith("converted")


def test_oasr_convert_script_is_the_same_command(pt, tmp_path, capsys):
    from oasr_cli.main import convert_main

    assert convert_main([str(pt), str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.startswith("converted")


def test_json_report(cli, pt, tmp_path):
    code, out, _ = cli("convert", "--json", pt, tmp_path / "out")
    assert code == 0
    (report,) = json.loads(out)
    assert report["status"] == "converted"
    assert report["converter"] == "openai-whisper" and report["architecture"] == "whisper"
    assert report["tensors"] > 0 and report["parameters"] > 0


def test_dry_run_writes_nothing(cli, pt, tmp_path):
    code, out, _ = cli("convert", "--dry-run", pt, tmp_path / "out")
    assert code == 0
    assert "would write" in out and "detection:" in out and "mapping:" in out
    assert not (tmp_path / "out").exists()


def test_batch_goes_on_past_a_bad_source(cli, tmp_path):
    a = write_openai_pt(tmp_path / "a.pt")
    b = write_openai_pt(tmp_path / "b.pt", seed=2)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "readme.txt").write_text("not a model")
    code, out, err = cli("convert", a, bad, b, tmp_path / "bundles")
    assert code == 1
    assert (tmp_path / "bundles" / "a" / "oasr_config.json").is_file()
    assert (tmp_path / "bundles" / "b" / "oasr_config.json").is_file()
    assert not (tmp_path / "bundles" / "bad").exists()
    assert "1 of 3 source(s) failed" in err


def test_inspect_bundle_and_foreign(cli, pt, tmp_path):
    cli("convert", pt, tmp_path / "out")
    code, out, _ = cli("inspect", "--json", tmp_path / "out")
    info = json.loads(out)
    assert code == 0 and info["kind"] == "bundle" and info["architecture"] == "whisper"
    assert info["provenance"]["source_format"] == "openai-whisper" and info["parameters"] > 0
    code, out, _ = cli("inspect", pt)
    assert code == 0 and "picked         openai-whisper" in out


# --- bad input: one line on stderr, exit 1, nothing written -------------------------------------


def test_missing_path(cli, tmp_path):
    code, out, err = cli("convert", tmp_path / "absent", tmp_path / "out")
    _one_line_error(code, err, "no such file or directory")
    assert not (tmp_path / "out").exists()


def test_empty_directory(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = cli("convert", tmp_path / "empty", tmp_path / "out")
    _one_line_error(code, err, "empty directory")
    assert not (tmp_path / "out").exists()


def test_unrecognised_directory(cli, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "weights.npz").write_bytes(b"\0" * 10)
    code, _, err = cli("convert", tmp_path / "src", tmp_path / "out")
    _one_line_error(code, err, "no converter recognises")


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_safetensors(cli, tmp_path, damage):
    from safetensors.torch import save_file
    import torch

    src = tmp_path / "hf"
    write_hf_config_full(src)
    save_file({"model.encoder.conv1.weight": torch.zeros(32, 80, 3)}, src / "model.safetensors")
    data = (src / "model.safetensors").read_bytes()
    (src / "model.safetensors").write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\xff" * 64)
    code, _, err = cli("convert", src, tmp_path / "out")
    _one_line_error(code, err, "truncated or corrupted")
    assert not (tmp_path / "out").exists()


def test_bundle_with_missing_field_or_unknown_version(cli, pt, tmp_path):
    dst = tmp_path / "out"
    cli("convert", pt, dst)
    cfg_path = dst / "oasr_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["format_version"] = 7
    cfg_path.write_text(json.dumps(cfg))
    code, _, err = cli("inspect", dst)
    _one_line_error(code, err, "format_version 7 is not supported")
    del cfg["model"]
    cfg["format_version"] = 1
    cfg_path.write_text(json.dumps(cfg))
    code, _, err = cli("inspect", dst)
    _one_line_error(code, err, "missing field(s): model")


class _Payload:
    """Unpickling this would create a file; oasr must refuse before any code runs."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_pickled_class_is_never_executed(cli, tmp_path):
    import torch

    marker = tmp_path / "executed"
    torch.save({"dims": {}, "model_state_dict": {}, "x": _Payload(marker)}, tmp_path / "evil.pt")
    assert not marker.exists()
    code, _, err = cli("convert", tmp_path / "evil.pt", tmp_path / "out")
    _one_line_error(code, err, "refusing to unpickle")
    assert not marker.exists()
    assert not (tmp_path / "out").exists()


def test_plain_pickle_is_refused(cli, tmp_path):
    marker = tmp_path / "executed"
    (tmp_path / "evil.pt").write_bytes(pickle.dumps(_Payload(marker)))
    code, _, err = cli("convert", tmp_path / "evil.pt", tmp_path / "out")
    assert code == 1 and not marker.exists()
    assert len(err.strip().splitlines()) == 1


def test_destination_inside_source(cli, tmp_path):
    src = tmp_path / "hf"
    write_hf_config_full(src)
    code, _, err = cli("convert", src, src / "bundle")
    _one_line_error(code, err, "inside the source")
    assert not (src / "bundle").exists()


def test_destination_that_is_not_a_bundle(cli, pt, tmp_path):
    dst = tmp_path / "important"
    dst.mkdir()
    (dst / "data.txt").write_text("keep me")
    code, _, err = cli("convert", pt, dst)
    _one_line_error(code, err, "is not an oasr bundle")
    assert (dst / "data.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    code, _, err = cli("convert", pt, tmp_path / "file")
    _one_line_error(code, err, "is not an oasr bundle")


def test_converting_a_bundle_is_refused(cli, pt, tmp_path):
    cli("convert", pt, tmp_path / "out")
    code, _, err = cli("convert", tmp_path / "out", tmp_path / "again")
    _one_line_error(code, err, "already a native bundle")


# --- atomicity ----------------------------------------------------------------------------------


def _fail_while_writing(monkeypatch, exc: BaseException):
    import oasr.io.bundle

    real = oasr.io.bundle.write_safetensors

    def broken(tensors, path, metadata=None):
        real(tensors, path, metadata=metadata)
        Path(path).write_bytes(Path(path).read_bytes()[:100])  # half-written
        raise exc

    monkeypatch.setattr(oasr.io.bundle, "write_safetensors", broken)


@pytest.mark.parametrize("exc, code", [(OSError("disk full"), 1), (KeyboardInterrupt(), 130)])
def test_failed_or_interrupted_run_leaves_destination_as_it_was(cli, pt, tmp_path, monkeypatch, exc, code):
    dst = tmp_path / "out"
    assert cli("convert", pt, dst)[0] == 0
    before = _snapshot(dst)
    write_openai_pt(pt, seed=3)  # the source changed: the bundle is out of date
    _fail_while_writing(monkeypatch, exc)
    got, _, err = cli("convert", pt, dst)
    assert got == code, err
    assert _snapshot(dst) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "tiny.pt"]  # no temporary left over


def test_failed_first_run_creates_nothing(cli, pt, tmp_path, monkeypatch):
    _fail_while_writing(monkeypatch, OSError("disk full"))
    code, _, err = cli("convert", "--quiet", pt, tmp_path / "out")
    _one_line_error(code, err, "disk full")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.pt"]


def test_usage_errors_exit_2(cli, pt):
    assert cli("convert", pt)[0] == 2
    assert cli("convert", "--dtype", "float64", pt, "x")[0] == 2
    assert cli("frobnicate")[0] == 2


def test_debug_shows_traceback(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("OASR_DEBUG", "1")
    code, _, err = cli("convert", tmp_path / "absent", tmp_path / "out")
    assert code == 1 and "Traceback" in err and err.strip().splitlines()[-1].startswith("oasr: error:")
