"""A ``.nemo`` archive, checked member by member, then extracted into a temporary folder.

NeMo's ``save_to`` writes a tar (``tar.add(folder, arcname=".")``: members ``.``,
``./model_config.yaml``, ``./model_weights.ckpt`` and artifacts such as
``./<32 hex>_tokenizer.model``); archives before NeMo 1.7 are gzipped. Before one byte is
written every member is checked from the tar index: a plain relative name (no ``..``, no
absolute path), a regular file or a folder (links, hard links, devices and FIFOs are refused,
where NeMo only skips them), no name twice, and declared sizes that the archive can hold (an
uncompressed tar stores its members whole; a compressed one may inflate at most ``MAX_RATIO``
times) and the disk can take. Members are then copied with that size as a hard limit, so a
header that lies cannot make the copy larger. The folder is removed on every exit path: an
error, ``close()``, the end of a ``with`` block, or the object being collected.
"""

from __future__ import annotations

import gzip
import lzma
import os
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path

from ...errors import ConversionError, InputError
from ..files import inside, name_problem

CONFIG_NAME = "model_config.yaml"
WEIGHTS_NAME = "model_weights.ckpt"
MAX_RATIO = 100  # inflated / stored bytes for a compressed archive (weights barely compress)
_CHUNK = 1 << 22
_GZIP_MAGIC = b"\x1f\x8b"
# What reading a damaged tar or compressed stream raises, besides tarfile's own errors.
_BROKEN = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError, gzip.BadGzipFile, ValueError)


def looks_like_tar(path: Path) -> bool:
    """A tar header (``ustar`` at byte 257) or a gzip stream at the start of ``path``; reads 512 bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return head[:2] == _GZIP_MAGIC or head[257:262] == b"ustar"


def _member_name(member: tarfile.TarInfo) -> str | None:
    """The member's name without NeMo's leading ``./``; None for the archive's root entry."""
    name = member.name
    while name.startswith("./"):
        name = name[2:]
    return None if name in ("", ".") else name.rstrip("/") if member.isdir() else name


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"a symbolic link to {member.linkname!r}"
    if member.islnk():
        return f"a hard link to {member.linkname!r}"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    return "not a regular file"


EXTRACT_PREFIX = "oasr-nemo-"


def sweep_orphans(folder: str | None = None) -> list[Path]:
    """Remove the extraction folders (``oasr-nemo-<pid>-*``) in the temporary folder whose process
    is gone (killed before it could clean up: a real model leaves gigabytes); those removed."""
    root = Path(folder or tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        pid = entry.name[len(EXTRACT_PREFIX):].split("-", 1)[0] if entry.name.startswith(EXTRACT_PREFIX) else ""
        if pid.isdigit() and entry.is_dir(follow_symlinks=False) and not _alive(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


class NemoArchive:
    """The checked, extracted members of one ``.nemo`` file. ``folder`` holds them while open."""

    def __init__(self, path: Path):
        self.path = Path(path)
        sweep_orphans()
        # Named for this process, so a later run can tell it from a live one's; its finaliser removes it at collection too.
        self._tmp = tempfile.TemporaryDirectory(prefix=f"{EXTRACT_PREFIX}{os.getpid()}-")
        self.folder = Path(self._tmp.name)
        self.members: list[str] = []
        try:
            self._extract()
        except BaseException:
            self.close()
            raise

    # -- the public face ---------------------------------------------------------------------

    @property
    def config_file(self) -> Path:
        return self._required(CONFIG_NAME)

    @property
    def weights_file(self) -> Path:
        return self._required(WEIGHTS_NAME)

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> "NemoArchive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------

    def _required(self, name: str) -> Path:
        if name not in self.members:
            held = ", ".join(self.members[:6]) or "nothing"
            raise ConversionError(f"{self.path} holds no {name} (it holds {held}); not a NeMo archive")
        return self.folder / name

    def _open(self) -> tuple[tarfile.TarFile, bool]:
        try:
            with open(self.path, "rb") as f:
                compressed = f.read(2) == _GZIP_MAGIC
            return tarfile.open(self.path, "r:gz" if compressed else "r:"), compressed
        except OSError as e:
            raise InputError(f"cannot read {self.path}: {e.strerror or e}") from e
        except _BROKEN as e:
            raise ConversionError(f"{self.path} is not a readable NeMo archive (a tar): {_line(e)}") from e

    def _extract(self) -> None:
        tar, compressed = self._open()
        with tar:
            try:
                members = tar.getmembers()
            except _BROKEN as e:
                raise ConversionError(f"{self.path} is truncated or corrupt: {_line(e)}") from e
            plan = self._check(members, compressed)
            for member, name in plan:
                target = inside(self.folder, name, what=f"{self.path}: the member", error=ConversionError)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                self._copy(tar, member, target, name)
                self.members.append(name)

    def _check(self, members: list[tarfile.TarInfo], compressed: bool) -> list[tuple[tarfile.TarInfo, str]]:
        """Every member's name, kind and size refused or accepted before anything is written."""
        plan, seen, total = [], set(), 0
        archive_bytes = self.path.stat().st_size
        for member in members:
            name = _member_name(member)
            if name is None:
                continue
            problem = name_problem(name)
            if problem is not None:
                raise ConversionError(f"{self.path}: the member {member.name!r} {problem}; refusing the archive")
            if not (member.isfile() or member.isdir()):
                raise ConversionError(f"{self.path}: the member {member.name!r} is {_kind(member)}; refusing the archive")
            if name in seen:
                raise ConversionError(f"{self.path}: the member {name!r} appears twice; refusing the archive")
            seen.add(name)
            if member.isfile():
                if not compressed and member.offset_data + member.size > archive_bytes:
                    raise ConversionError(
                        f"{self.path} is truncated: the member {name!r} declares {member.size} bytes "
                        f"past the archive's end ({archive_bytes} bytes)"
                    )
                total += member.size
            plan.append((member, name))
        limit = archive_bytes * (MAX_RATIO if compressed else 1)
        if total > limit:
            raise ConversionError(
                f"{self.path}: its members declare {total} bytes, more than {'%d x ' % MAX_RATIO if compressed else ''}"
                f"the archive's {archive_bytes}; refusing it"
            )
        free = shutil.disk_usage(self.folder).free
        if total > free:
            raise ConversionError(
                f"{self.path} needs {total / 1e9:.2f} GB to extract and {self.folder.parent} has {free / 1e9:.2f} GB free "
                "(set TMPDIR to a larger folder)"
            )
        return plan

    def _copy(self, tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, name: str) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        left = member.size
        try:
            src = tar.extractfile(member)
            if src is None:
                raise ConversionError(f"{self.path}: the member {name!r} has no data")
            with src, os.fdopen(os.open(target, flags, 0o600), "wb") as dst:
                while left > 0:
                    block = src.read(min(_CHUNK, left))
                    if not block:
                        break
                    dst.write(block)
                    left -= len(block)
        except _BROKEN as e:
            raise ConversionError(f"{self.path} is truncated or corrupt (in {name!r}): {_line(e)}") from e
        if left:
            raise ConversionError(f"{self.path} is truncated: the member {name!r} ends {left} bytes early")


def _line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
