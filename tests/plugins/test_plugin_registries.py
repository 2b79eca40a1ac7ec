"""The registries, proven by a plugin (tests/plugins/oasr_testplugin): a hub source kind of its own
resolves a registry name, and a transcript format of its own is chosen with -F, through the
runtime and through `oasr`, with nothing in runtime/ or oasr_cli/ naming either.

The source kind ``folder`` copies a folder's files where a download would fetch them; the model
in the folder is a tiny random Whisper. The format ``shout`` writes the text in capitals; it
transcribes with the test-only CTC plugin (tests/plugins/oasr_tinyctc), whose weights here answer
the label "a" on every frame.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tiny_models import write_openai_pt

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = Path(__file__).resolve().parent  # this folder holds the plugin distributions


@pytest.fixture
def catalog(monkeypatch, tmp_path) -> str:
    """A registry file naming one model, ``tiny-folder``, whose only source is a ``folder``."""
    folder = tmp_path / "weights"
    folder.mkdir()
    write_openai_pt(folder / "tiny.pt")
    entry = {
        "name": "tiny-folder", "task": "transcribe", "architecture": "whisper", "licence": "MIT",
        "size": (folder / "tiny.pt").stat().st_size, "languages": ["en"], "sources": [{"folder": {"path": str(folder)}}],
    }
    registry = tmp_path / "registry.yaml"
    registry.write_text(json.dumps({"format": 1, "models": [entry]}))  # JSON is YAML
    monkeypatch.setenv("OASR_CATALOG", str(registry))
    return "tiny-folder"


def test_runtime_and_cli_name_no_plugin():
    for folder in (ROOT / "runtime", ROOT / "oasr_cli"):
        for path in folder.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for name in ("oasr_testplugin", "shout", '"folder"'):
                assert name not in text, f"{path} names {name}"


def test_a_plugin_source_kind_resolves_a_name(plugin, catalog):
    import oasr
    from oasr.hub.resolve import bundle_origin, describe_resolution, resolve_model

    info = describe_resolution(catalog, probe=False)
    assert [s["step"] for s in info["steps"]] == ["oasr cache", "folder copy"]
    assert info["would_use"]["step"] == "folder copy" and "tiny.pt" in info["would_use"]["detail"]
    assert info["model"]["sources"] == [{"kind": "folder", "path": info["model"]["sources"][0]["path"]}]

    bundle = resolve_model(catalog, source="folder")
    origin = bundle_origin(bundle)
    assert origin["source"] == "folder" and origin["origin"].startswith("folder:")
    assert resolve_model(catalog) == bundle  # the second time from the oasr cache, through the kind's key
    assert describe_resolution(catalog, probe=False)["steps"][0]["outcome"] == "hit"
    # the provenance's revision is the kind's label
    assert oasr.load_pretrained(catalog, device="cpu", dtype="float32").identity.revision == f"copied-{origin['key']}"


def test_a_plugin_source_kind_through_the_command_line(catalog, tmp_path, plugin_cli):
    env = {"OASR_CACHE": str(tmp_path / "cache"), "OASR_CATALOG": os.environ["OASR_CATALOG"]}
    shown = plugin_cli("models", "resolve", catalog, "--source", "folder", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["would_use"]["step"] == "folder copy"
    pulled = plugin_cli("models", "pull", catalog, "--source", "folder", "--json", env=env)
    assert pulled.returncode == 0, pulled.stderr
    assert json.loads(pulled.stdout)["origin"]["source"] == "folder"
    helped = plugin_cli("models", "resolve", "--help", env=env)
    assert "folder" in helped.stdout
    refused = plugin_cli("models", "resolve", catalog, "--source", "pypi", env=env)
    assert refused.returncode != 0 and "no pypi source" in refused.stderr


@pytest.fixture
def says_a(tmp_path) -> Path:
    """A tinyctc checkpoint whose network answers the label "a" on every frame."""
    import torch
    from safetensors.torch import save_file

    labels = ["<blank>", " ", "a", "b"]
    bias = torch.zeros(len(labels))
    bias[2] = 5.0
    folder = tmp_path / "tinyctc-ckpt"
    folder.mkdir()
    save_file({"W": torch.zeros(len(labels), 80), "b": bias}, str(folder / "weights.safetensors"))
    (folder / "tinyctc.json").write_text(json.dumps({"labels": labels, "n_mels": 80, "stride": 2, "language": "en"}))
    return folder


def test_a_plugin_format_is_chosen_with_F(says_a, tmp_path, plugin_cli):
    wav = tmp_path / "tone.wav"
    sf.write(wav, (0.1 * np.sin(2 * np.pi * 440 * np.arange(16000) / 16000)).astype(np.float32), 16000)
    env = {"OASR_CACHE": str(tmp_path / "cache")}
    run = plugin_cli("transcribe", "-m", says_a, "-f", wav, "-F", "shout", env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "A\n"
    run = plugin_cli("transcribe", "-m", says_a, "-f", wav, "-o", tmp_path / "out.shout", env=env)  # by its extension
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out.shout").read_text() == "A\n"
    helped = plugin_cli("transcribe", "--help", env=env)
    assert "shout" in helped.stdout


def test_a_plugin_format_through_the_python_api(plugin):
    from oasr.formats import FORMATS, format_from_suffix, render
    from oasr.results import Segment, Transcript

    transcript = Transcript(" hello there", (Segment(0, 0.0, 1.0, " hello there", ()),), "en", None, 1.0)
    assert render(transcript, "shout") == "HELLO THERE\n"
    assert format_from_suffix("talk.shout") == "shout"
    assert FORMATS[:6] == ("txt", "srt", "vtt", "json", "tsv", "lrc") and FORMATS[-1] == "shout"


def test_installed_packages_are_read_once_for_every_group(monkeypatch):
    """Each read of the entry points walks every installed package's metadata: a command asks
    for about ten groups, so they are read once per process (and again after ``clear``)."""
    import importlib.metadata

    from oasr import plugins

    reads = []

    def counted(**kw):
        reads.append(kw)
        return importlib.metadata.entry_points(**kw)

    monkeypatch.setattr(plugins, "entry_points", counted)
    plugins.clear()
    try:
        groups = ("oasr.models", "oasr.converters", "oasr.features", "oasr.tokenizers", "oasr.decoding")
        found = {g: plugins.declared(g) for g in groups}
        assert len(reads) == 1
        assert all(found[g] == {ep.name: ep for ep in importlib.metadata.entry_points(group=g)} for g in groups)
        assert "whisper" in found["oasr.models"]
    finally:
        plugins.clear()
