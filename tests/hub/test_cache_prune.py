"""oasr models list --cached (sizes on disk) and oasr models rm --all-unused (a cache scan).

The cache holds entries committed as the hub commits them (a bundle folder, then its record),
with weights of known sizes, one with an int8 variant beside it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from oasr.hub import cache as _cache


def _entry(root: Path, name: str, key: str, payload: int, created: str, variant: bool = False) -> Path:
    """A cache entry as the hub commits one: a bundle folder, then its record."""
    staged = root / "tmp" / f"stage-{name}-{key}"
    staged.mkdir(parents=True)
    (staged / _cache.CONFIG_NAME).write_text("{}")
    (staged / _cache.WEIGHTS_NAME).write_bytes(b"\0" * payload)
    record = _cache.commit(root, _cache.CacheRecord(name=name, key=key, source="pypi", origin=f"pypi:{name}==1"), staged)
    record.created = created
    _cache.write_record(record)
    if variant:
        shutil.copytree(record.bundle, record.bundle.with_name(f"{key}.int8"))
    return record.bundle


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("OASR_CACHE", str(root))
    return {
        "base_old": _entry(root, "whisper-base", "k-old", 1000, "2026-01-01T00:00:00+0000"),
        "base_new": _entry(root, "whisper-base", "k-new", 2000, "2026-06-01T00:00:00+0000", variant=True),  # the default of transcribe
        "small": _entry(root, "whisper-small", "k1", 3000, "2026-02-01T00:00:00+0000"),
        "crepe": _entry(root, "crepe-tiny", "k1", 500, "2026-02-01T00:00:00+0000"),
        "local": _entry(root, "local", "abc", 700, "2026-03-01T00:00:00+0000"),
    }


def test_list_cached_gives_sizes_on_disk_and_use(cli, cache):
    code, out, err = cli("models", "list", "--cached", "--json")
    assert code == 0, err
    rows = {(r["name"], Path(r["bundle"]).name): r for r in json.loads(out)}
    assert rows[("whisper-base", "k-new")]["bytes_on_disk"] == 2 * (2000 + 2)  # the bundle and its int8 variant
    assert rows[("whisper-base", "k-new")]["used"] == "default of transcribe"
    assert rows[("whisper-base", "k-old")]["unused"] and rows[("whisper-small", "k1")]["unused"]
    assert rows[("crepe-tiny", "k1")]["bytes_on_disk"] == 502
    code, out, _ = cli("models", "list", "--cached")
    assert code == 0
    assert "SIZE ON DISK" in out.splitlines()[0] and "5 bundle(s)" in out.splitlines()[-1]
    code, out, _ = cli("models", "list", "--cached", "--task", "pitch", "--json")
    assert [r["name"] for r in json.loads(out)] == ["crepe-tiny"]


def test_rm_all_unused_keeps_defaults_and_kept_names(cli, cache):
    before = {k: p.is_dir() for k, p in cache.items()}
    code, out, err = cli("models", "rm", "--all-unused", "--keep", "whisper-small", "--dry-run")
    assert code == 0 and {k: p.is_dir() for k, p in cache.items()} == before  # nothing removed
    assert sorted(line.split()[2] for line in out.splitlines()) == sorted(str(cache[k]) for k in ("base_old", "local"))
    code, out, err = cli("models", "rm", "--all-unused", "--keep", "whisper-small")
    assert code == 0, err
    assert {k for k, p in cache.items() if p.is_dir()} == {"base_new", "small", "crepe"}  # crepe-tiny: the default of pitch
    assert cache["base_new"].with_name("k-new.int8").is_dir()
    assert not (cache["local"].parent).exists()
    code, out, _ = cli("models", "rm", "--all-unused")
    assert code == 0 and {k for k, p in cache.items() if p.is_dir()} == {"base_new", "crepe"}


def test_rm_flags_go_together(cli, cache):
    assert cli("models", "rm")[0] == 2
    assert cli("models", "rm", "whisper-base", "--all-unused")[0] == 2
    assert cli("models", "rm", "whisper-base", "--dry-run")[0] == 2
