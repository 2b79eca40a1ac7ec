"""A source stored inside the destination is refused, not deleted (issue 17, item 6).

``oasr convert B/ckpt B --force`` used to replace B whole, taking B/ckpt with it; quantize the
same with its source bundle. Both refuse in one line (exit 1), leaving everything as it was.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oasr.conversion.run import check_destination
from oasr.errors import InputError
from oasr.io import bundle
from tiny_models import write_openai_pt

DIMS = dict(n_audio_state=128, n_text_state=128, n_vocab=96, n_audio_ctx=16, n_text_ctx=12)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(code: int, err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith("oasr: error:"), err
    assert "lies inside the destination" in lines[0], lines[0]


@pytest.fixture
def bundle_with_its_source(cli, tmp_path) -> tuple[Path, Path]:
    """B, a bundle, holding B/ckpt/tiny.pt: the checkpoint it was converted from, copied in."""
    pt = write_openai_pt(tmp_path / "tiny.pt", **DIMS)
    dst = tmp_path / "B"
    code, _, err = cli("convert", "-q", pt, dst)  # through the CLI: its log goes to this test's stderr
    assert code == 0, err
    (dst / "ckpt").mkdir()
    shutil.copyfile(pt, dst / "ckpt" / "tiny.pt")
    return dst, dst / "ckpt" / "tiny.pt"


def test_convert_refuses_a_source_inside_the_destination(cli, bundle_with_its_source):
    dst, src = bundle_with_its_source
    before = _snapshot(dst)
    code, out, err = cli("convert", src, dst, "--force")
    _refused(code, err)
    assert _snapshot(dst) == before  # nothing touched, the source still there
    code, _, err = cli("convert", src.parent, dst, "--force")  # the folder holding it: the same
    _refused(code, err)
    assert _snapshot(dst) == before
    assert [p.name for p in dst.parent.iterdir() if p.name.startswith(".")] == []  # no temporaries either


def test_a_symlinked_destination_is_seen_through(cli, bundle_with_its_source, tmp_path):
    dst, src = bundle_with_its_source
    link = tmp_path / "link"
    link.symlink_to(dst, target_is_directory=True)
    before = _snapshot(dst)
    code, _, err = cli("convert", src, link, "--force")
    _refused(code, err)
    assert _snapshot(dst) == before


def test_destination_inside_the_source_is_still_refused(tmp_path):
    src = tmp_path / "ckpt"
    src.mkdir()
    write_openai_pt(src / "tiny.pt")
    with pytest.raises(InputError, match="is inside the source"):
        check_destination(src, src / "out")
    with pytest.raises(InputError, match="lies inside the destination"):
        check_destination(src / "tiny.pt", tmp_path)
    check_destination(src / "tiny.pt", tmp_path / "elsewhere")  # siblings are fine


def test_quantize_refuses_a_source_bundle_inside_the_destination(cli, bundle_with_its_source, tmp_path):
    fp32, _ = bundle_with_its_source
    q = tmp_path / "Q"
    code, _, err = cli("quantize", fp32, q)
    assert code == 0, err
    shutil.copytree(fp32, q / "fp32", ignore=shutil.ignore_patterns("ckpt"))
    before = _snapshot(q)
    code, _, err = cli("quantize", q / "fp32", q, "--force")
    _refused(code, err)
    assert _snapshot(q) == before and bundle.is_bundle(q / "fp32")


def test_quantize_refuses_a_foreign_source_inside_the_destination(cli, bundle_with_its_source, tmp_path):
    """A checkpoint path is checked before it is converted into the cache (which would hide it)."""
    fp32, pt = bundle_with_its_source
    before = _snapshot(fp32)
    code, _, err = cli("quantize", pt, fp32, "--force")
    _refused(code, err)
    assert _snapshot(fp32) == before
