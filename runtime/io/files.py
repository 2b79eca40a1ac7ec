"""Files on disk: names that stay inside their folder, atomic writes, leftovers swept, hashing.

- ``inside(folder, name)``: a name read from a bundle, a catalog, an index or an archive, as a
  path inside ``folder``; absolute names, ``..`` and symbolic links that lead out are refused
  with the caller's error class.
- ``atomic_write_text`` / ``atomic_write_bytes`` / ``atomic_directory``: a temporary sibling,
  then a rename over the destination, so an interrupted or failed run leaves it as it was. Only
  regular files (or new paths) are replaced: a device, a FIFO or a symlink to one is opened and
  written directly (``-o /dev/null``, ``-o /dev/stdout``), and a symlink to a regular file or a
  folder has its target replaced (the link stays a link).
- Temporaries are named ``.<name>.tmp-<pid>-<host>-<random>`` (``.old-`` for a destination moved
  aside), removed on every exit path, and those a killed process left are swept on the next
  write to the same destination: only names of this pattern, only when their process is dead on
  this host or they are older than ``STALE_SECONDS``.
- What is written gets the usual permissions (0666 / 0777 less the umask), not mkstemp's 0600.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

from ..errors import InputError, OasrError

STALE_SECONDS = 3600.0  # a temporary this old is swept whoever made it


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file, read through one reused buffer."""
    h = hashlib.sha256()
    buf = bytearray(chunk)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# names that stay inside their folder

_DRIVE = re.compile(r"[A-Za-z]:")


def name_problem(name: object, *, nested: bool = True) -> str | None:
    """Why ``name`` is not a plain relative name (``a/b.bin``; ``nested=False``: one component), or None."""
    if not isinstance(name, str) or not name:
        return "is not a file name"
    if "\0" in name:
        return "holds a NUL byte"
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        return "is an absolute path"
    if "\\" in name:
        return "holds a backslash"
    parts = name.split("/")
    if ".." in parts:
        return "climbs out of its folder with '..'"
    if any(p in ("", ".") for p in parts):
        return "is not a plain relative path"
    if not nested and len(parts) > 1:
        return "is not a plain file name"
    return None


def plain_name(name: object, *, what: str = "the name", error: type[OasrError] = InputError, nested: bool = True) -> str:
    """``name`` when it is a plain relative name, else ``error`` (one line)."""
    problem = name_problem(name, nested=nested)
    if problem is not None:
        raise error(f"{what} {name!r} {problem}: refused, it could lead outside the folder")
    return name  # type: ignore[return-value]


def inside(
    folder: Path,
    name: object,
    *,
    what: str = "the name",
    error: type[OasrError] = InputError,
    nested: bool = True,
    within: Path | None = None,
) -> Path:
    """``folder / name``, after checking that ``name`` is a plain relative name and that the path,
    symbolic links followed, stays inside ``folder`` (or ``within``, a folder above it: a Hugging
    Face snapshot's files are links into its repository's ``blobs/``). Else ``error``, one line."""
    plain_name(name, what=what, error=error, nested=nested)
    folder = Path(folder)
    path = folder / name  # type: ignore[operator]
    try:
        root = Path(within if within is not None else folder).resolve()
        resolved = path.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise error(f"{what} {name!r} in {folder} cannot be resolved: {e}") from e
    if root not in resolved.parents:
        raise error(f"{what} {name!r} leads to {resolved} through a symbolic link; refused: it is outside the folder {folder}")
    return path


# ---------------------------------------------------------------------------------------------
# temporaries: named recognisably, swept when their process is gone

_KINDS = ("tmp", "old")


def _host_tag() -> str:
    try:
        node = os.uname().nodename
    except AttributeError:  # no uname (Windows)
        import socket

        node = socket.gethostname()
    return hashlib.sha256(node.encode("utf-8", "replace")).hexdigest()[:6]


_HOST = _host_tag()


def temp_sibling(dst: Path, kind: str = "tmp") -> Path:
    """A fresh name beside ``dst``: ``.<name>.<kind>-<pid>-<host>-<random>``."""
    assert kind in _KINDS
    return Path(dst).parent / f".{Path(dst).name}.{kind}-{os.getpid()}-{_HOST}-{uuid.uuid4().hex[:8]}"


def _ours(name: str, entry: str) -> tuple[str, int | None, str | None] | None:
    """(kind, pid, host) when ``entry`` is a temporary of ours for the destination ``name``;
    pid and host are None for the older naming (``.<name>.tmp-<8 hex>``)."""
    prefix = f".{name}."
    if not entry.startswith(prefix):
        return None
    rest = entry[len(prefix):]
    m = re.fullmatch(r"(tmp|old)-(\d+)-([0-9a-f]{6})-[0-9a-f]{8}", rest)
    if m:
        return m.group(1), int(m.group(2)), m.group(3)
    m = re.fullmatch(r"(tmp|old)-[0-9a-f]{8}", rest)
    if m:
        return m.group(1), None, None
    return None


def process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if os.name == "nt":  # os.kill would terminate it there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _newest_mtime(path: Path, limit: int = 1000) -> float:
    """The latest modification time of ``path`` and, for a folder, of what it holds (links not followed)."""
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        seen = 0
        for top, dirs, files in os.walk(path):
            for n in (*dirs, *files):
                seen += 1
                if seen > limit:
                    return newest
                with contextlib.suppress(OSError):
                    newest = max(newest, os.lstat(os.path.join(top, n)).st_mtime)
    return newest


def _stale(path: Path, pid: int | None, host: str | None, now: float) -> bool:
    """Made by a process of this host that is gone; or, when that cannot be told (another host,
    the older naming), not modified for ``STALE_SECONDS``. A live process's is never stale."""
    if pid is not None and host == _HOST:
        return not process_alive(pid)
    try:
        return now - _newest_mtime(path) > STALE_SECONDS
    except OSError:
        return False


def _remove(path: Path) -> None:
    """Remove a file, a link (not what it points to) or a folder; quietly if it is gone."""
    try:
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)
        else:
            shutil.rmtree(path, ignore_errors=True)
    except OSError:
        pass


def sweep_stale(dst: Path) -> list[Path]:
    """Remove the temporaries of ours beside ``dst`` that a killed process left (see the module
    docstring); a destination moved aside and never replaced is put back first. Those removed."""
    dst = Path(dst)
    try:
        entries = list(os.scandir(dst.parent))
    except OSError:
        return []
    now = time.time()
    stale: list[tuple[str, Path]] = []
    for entry in entries:
        found = _ours(dst.name, entry.name)
        if found is not None and _stale(Path(entry.path), found[1], found[2], now):
            stale.append((found[0], Path(entry.path)))
    if not stale:
        return []
    olds = sorted((p for kind, p in stale if kind == "old"), key=lambda p: p.lstat().st_mtime, reverse=True)
    if olds and not os.path.lexists(dst):  # killed between moving the destination aside and the new one in
        with contextlib.suppress(OSError):
            os.replace(olds[0], dst)
            stale = [(k, p) for k, p in stale if p != olds[0]]
    for _, path in stale:
        _remove(path)
    return [p for _, p in stale]


# ---------------------------------------------------------------------------------------------
# permissions


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # the portable way: set it and put it back
    os.umask(mask)
    return mask


def file_mode() -> int:
    return 0o666 & ~_umask()


def dir_mode() -> int:
    return 0o777 & ~_umask()


def usual_permissions(folder: Path) -> None:
    """Give a folder written by us, and all it holds, 0666 / 0777 less the umask (an owner-executable
    file keeps its execute bits); safetensors and mkstemp write 0600. Links are not followed."""
    fmode, dmode = file_mode(), dir_mode()
    folder = Path(folder)
    with contextlib.suppress(OSError):
        os.chmod(folder, dmode)
    for top, dirs, files in os.walk(folder):
        for n in dirs:
            p = os.path.join(top, n)
            if not os.path.islink(p):
                with contextlib.suppress(OSError):
                    os.chmod(p, dmode)
        for n in files:
            p = os.path.join(top, n)
            with contextlib.suppress(OSError):
                st = os.lstat(p)
                if stat.S_ISREG(st.st_mode):
                    os.chmod(p, dmode if st.st_mode & stat.S_IXUSR else fmode)


# ---------------------------------------------------------------------------------------------
# atomic folders


def _follow(dst: Path) -> Path:
    """``dst``, or where it points when it is a symbolic link (its target is replaced, not the link)."""
    return Path(os.path.realpath(dst)) if os.path.islink(dst) else dst


_exchange_fn: list = []


def _renameat2():
    if not _exchange_fn:
        fn = None
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fn = libc.renameat2
                fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
                fn.restype = ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _exchange_fn.append(fn)
    return _exchange_fn[0]


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where
    the system or the file system cannot, so the caller falls back to two renames."""
    fn = _renameat2()
    if fn is None:
        return False
    import ctypes

    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _put_in_place(tmp: Path, dst: Path) -> None:
    """Move the finished ``tmp`` onto ``dst``. Where ``dst`` exists the two are exchanged in one
    step (``tmp`` then holds the previous one, removed by the caller), else renamed aside and
    back on failure. A destination another process put in place meanwhile (a lost race) is
    replaced in turn: one of the complete results stays, nothing else."""
    for _ in range(16):
        if os.path.lexists(dst):
            try:
                if _exchange(tmp, dst):
                    return
            except FileNotFoundError:  # gone meanwhile: a plain rename below
                continue
            old = temp_sibling(dst, "old")
            try:
                os.replace(dst, old)
            except FileNotFoundError:
                continue
        else:
            old = None
        try:
            os.replace(tmp, dst)
        except BaseException as e:
            if old is not None:
                with contextlib.suppress(OSError):
                    os.replace(old, dst)  # as it was (fails only if another result arrived: keep that one)
                _remove(old)
            if isinstance(e, OSError) and e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                continue  # another process's result arrived between our renames: again
            raise
        if old is not None:
            _remove(old)
        return
    raise OSError(errno.EBUSY, f"{dst} keeps being replaced by other processes", str(dst))


@contextlib.contextmanager
def atomic_directory(dst: Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``dst``; on success it replaces ``dst`` in one step where the
    system allows (else two renames, ``dst`` briefly absent, never half-written).

    On any exception, KeyboardInterrupt included, and after a lost race the temporary folder is
    removed and ``dst`` is untouched. A symbolic link ``dst`` keeps pointing where it did: the
    folder it points to is replaced. Temporaries of killed runs beside ``dst`` are swept first.
    """
    dst = _follow(Path(dst))
    sweep_stale(dst)
    tmp = temp_sibling(dst, "tmp")
    tmp.mkdir(mode=0o777)
    try:
        yield tmp
        usual_permissions(tmp)
        _put_in_place(tmp, dst)
    finally:
        if os.path.lexists(tmp):  # failed, interrupted, or the previous dst after an exchange
            _remove(tmp)


# ---------------------------------------------------------------------------------------------
# atomic files, and special files written in place


def _special(path: Path) -> bool:
    """True when ``path`` (links followed) exists and is not a regular file: a device, a FIFO, a
    socket; such a target is opened and written, never replaced."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``: atomically for a regular file or a new path (a temporary beside
    it renamed over it; an existing file keeps its permissions); directly into a device, a FIFO
    or a symlink to one; through a symlink to a regular file, onto its target (the link stays)."""
    path = Path(path)
    if _special(path):
        with open(path, "wb") as f:
            f.write(data)
        return
    target = _follow(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    sweep_stale(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = None
    tmp = temp_sibling(target, "tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    """``atomic_write_bytes`` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# parent folders made only when something is written there


def make_parents(path: Path) -> list[Path]:
    """Create the missing parent folders of ``path``; the ones created, outermost first (so a
    failed write can take them away again with ``remove_empty``)."""
    missing = []
    parent = Path(path).parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    created = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        created.append(folder)
    return created


def remove_empty(folders: list[Path]) -> None:
    """Remove the given folders (innermost first) while they are empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            break


def write_with_parents(path: Path, data: bytes) -> None:
    """``atomic_write_bytes`` into ``path``, its missing parent folders made now and taken away
    again when the write fails (a failed run leaves no new empty folders)."""
    created = make_parents(path)
    try:
        atomic_write_bytes(path, data)
    except BaseException:
        remove_empty(created)
        raise
