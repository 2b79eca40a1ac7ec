"""Issue 17, item 4: ``oasr models rm`` takes names, and the cache builds every path from
validated names: nothing outside the cache is deleted, and no lock is made for a refused name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oasr.errors import InputError
from oasr.hub import cache as _cache

from hub_helpers import hub_env  # noqa: F401  (fixture)
from cli_checks import one_line_error as _one_line_error




def _victim(folder: Path) -> Path:
    (folder / "keep" / "sub").mkdir(parents=True)
    (folder / "keep" / "sub" / "precious.txt").write_text("precious")
    return folder / "keep"


def _cached(root: Path, name: str, key: str = "sha-0123456789ab", **fields) -> Path:
    """A cache entry made the way the cache makes them (a staged folder committed, then its record)."""
    stage = root / "tmp" / f"stage-{name}-{key}"
    stage.mkdir(parents=True)
    (stage / "oasr_config.json").write_text("{}")
    record = _cache.CacheRecord(name=name, key=key, source="path", origin="test", **fields)
    return _cache.commit(root, record, stage).bundle


def _locks(root: Path) -> list[str]:
    folder = root / "locks"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("spec", ["../../victim/keep", "REL", "ABS", "..", "../keep", "a/../../keep", "/abs/missing/path"])
def test_paths_and_dots_are_refused_and_nothing_is_touched(cli, hub_env, monkeypatch, spec):
    victim = _victim(hub_env.tmp / "victim")
    cwd = hub_env.tmp / "w" / "x"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    spec = {"REL": "../../victim/keep", "ABS": str(victim)}.get(spec, spec)
    code, out, err = cli("models", "rm", spec)
    _one_line_error(code, err, "oasr models rm")
    assert out == ""
    assert (victim / "sub" / "precious.txt").read_text() == "precious"
    assert _locks(hub_env.cache) == []  # no lock made for a refused name, in the cache or elsewhere
    assert not list(hub_env.tmp.rglob("*.lock"))


@pytest.mark.parametrize("name", ["*", "bad name", "x;y", "a?b"])
def test_names_with_unsafe_characters_are_refused_without_a_lock(cli, hub_env, name):
    bundle = _cached(hub_env.cache, "kept-model")
    code, _, err = cli("models", "rm", name)
    _one_line_error(code, err)
    assert bundle.is_dir() and _locks(hub_env.cache) == []


def test_the_cache_refuses_names_that_are_not_names(hub_env):
    victim = _victim(hub_env.tmp / "outside")
    root = hub_env.cache
    root.mkdir()
    with pytest.raises(InputError, match="not a valid cache name"):
        _cache.remove(root, "../outside/keep")
    with pytest.raises(InputError, match="not a valid cache name"):
        _cache.remove(root, "..")
    with pytest.raises(InputError, match="not a valid cache name"):
        with _cache.entry_lock(root, "../../outside/lock"):
            pass
    with pytest.raises(InputError, match="not a valid cache key"):
        _cache.remove_entry(root, "local", "../../outside/keep")
    with pytest.raises(InputError):
        _cache.bundle_dir(root, "ok", "../x")
    assert _cache.lookup(root, "../outside", "keep") is None and _cache.records(root, "*") == []
    assert (victim / "sub" / "precious.txt").read_text() == "precious"
    assert not list(hub_env.tmp.rglob("*.lock"))


def test_a_record_naming_another_place_is_not_trusted(hub_env):
    root = hub_env.cache
    _cached(root, "honest")
    victim = _victim(hub_env.tmp / "outside")
    forged = root / "bundles" / "honest" / "sha-forged000000.json"
    data = json.loads((root / "bundles" / "honest" / "sha-0123456789ab.json").read_text())
    forged.write_text(json.dumps({**data, "name": "../../outside", "key": "sha-forged000000"}))
    assert [r.key for r in _cache.records(root)] == ["sha-0123456789ab"]
    _cache.remove(root, "honest")
    assert (victim / "sub" / "precious.txt").read_text() == "precious"


def test_names_still_work(cli, hub_env):
    bundle = _cached(hub_env.cache, "only-cached-model")  # its registry file is gone: the cache's name reads
    code, out, err = cli("models", "rm", "only-cached-model")
    assert code == 0 and out.strip() == f"removed {bundle}", err
    code, out, err = cli("models", "rm", "whisper-tiny.en")  # a registry name, nothing cached
    assert code == 0 and "has no bundle in the oasr cache" in err
    code, out, err = cli("models", "rm", "someone/some-repo@main")
    assert code == 0 and "has no bundle in the oasr cache" in err


def test_a_cache_bundle_folder_can_be_removed_by_its_path(cli, hub_env):
    bundle = _cached(hub_env.cache, "some-model")
    other = _cached(hub_env.cache, "some-model", key="sha-ba9876543210")
    code, out, err = cli("models", "rm", str(bundle))
    assert code == 0 and out.strip() == f"removed {bundle}", err
    assert not bundle.exists() and other.is_dir()


def test_a_converted_checkpoint_path_is_removed_also_with_dots(cli, hub_env, monkeypatch):
    from oasr.hub.resolve import resolve_model

    from tiny_models import write_openai_pt

    (hub_env.tmp / "ckpt").mkdir()
    pt = write_openai_pt(hub_env.tmp / "ckpt" / "tiny.pt")
    bundle = resolve_model(pt)
    (hub_env.tmp / "elsewhere").mkdir()
    monkeypatch.chdir(hub_env.tmp / "elsewhere")
    code, out, err = cli("models", "rm", "../ckpt/tiny.pt")
    assert code == 0 and out.strip() == f"removed {bundle}", err
    assert not bundle.exists() and pt.is_file()
