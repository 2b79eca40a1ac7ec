"""Configs resolved in linear time (issue 31): aliases and references nested into each other are
refused at once, not expanded; ordinary configs resolve as before."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import tarfile
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_checks import one_line_error
from oasr.errors import ConversionError
from oasr.hub.catalog import CatalogError, parse_catalog
from oasr.io.nemo.config import read_config_yaml, resolve_references

FUZZ_EXAMPLES = 60


def alias_bomb(width: int = 9, levels: int = 9) -> str:
    """YAML of ``levels`` anchors, each a list naming the one before ``width`` times."""
    lines = ['a0: &a0 "x"']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "model:\n  sample_rate: 16000\n" + "\n".join(lines) + "\n"


def reference_bomb(width: int = 8, levels: int = 11) -> str:
    """YAML of ``levels`` strings, each ``width`` references to the one before."""
    lines = ["model:", "  l0: xxxxxxxx"]
    for i in range(1, levels + 1):
        ref = "${model.l" + str(i - 1) + "}"
        lines.append(f"  l{i}: '{ref * width}'")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", [alias_bomb(), reference_bomb()], ids=["aliases", "references"])
def test_exponential_yaml_refused_in_under_two_seconds(tmp_path, text):
    path = tmp_path / "model_config.yaml"
    path.write_text(text)
    assert len(text) < 10_000
    started = time.perf_counter()
    with pytest.raises(ConversionError, match="expands to more than|string of more than"):
        read_config_yaml(path)
    assert time.perf_counter() - started < 2


def test_exponential_nemo_is_one_line(tmp_path):
    nemo = tmp_path / "bomb.nemo"
    with tarfile.open(nemo, "w") as tar:
        for name, data in (("model_config.yaml", alias_bomb().encode()), ("model_weights.ckpt", b"\0" * 16)):
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "oasr_cli", "convert", str(nemo), str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    one_line_error(run.returncode, run.stderr, "expands to more than")
    assert time.perf_counter() - started < 30  # the interpreter's start included
    assert not (tmp_path / "out").exists()


def test_lightning_hyper_parameters_shared_objects_refused():
    from oasr.io.nemo.lightning import hyper_parameters_config

    node: object = "x"
    for _ in range(9):
        node = [node] * 9  # one list named nine times, nine levels deep: 387 million values
    started = time.perf_counter()
    with pytest.raises(ConversionError, match="expands to more than"):
        hyper_parameters_config({"hyper_parameters": {"cfg": {"sample_rate": 16000, "bomb": node}}}, "x.ckpt")
    assert time.perf_counter() - started < 2


def test_catalog_alias_bomb_refused():
    started = time.perf_counter()
    with pytest.raises(CatalogError, match="expands to more than"):
        parse_catalog("format: 1\n" + alias_bomb())
    assert time.perf_counter() - started < 2


def test_self_containing_alias_refused(tmp_path):
    path = tmp_path / "model_config.yaml"
    path.write_text("model: &m\n  inner: *m\n")
    with pytest.raises(ConversionError, match="contains itself"):
        read_config_yaml(path)


def test_shared_references_still_resolve():
    """Memoised resolution gives what resolving each place afresh gives, relative references included."""
    cfg = {
        "model": {
            "sample_rate": 16000,
            "pre": {"rate": "${model.sample_rate}", "label": "rate ${..sample_rate} Hz"},
            "enc": {"d": 8, "ff": "${.d}", "copy": "${model.pre}"},
            "twice": "${model.pre.label}/${model.pre.label}",
        }
    }
    out = resolve_references(cfg, "cfg")["model"]
    assert out["pre"] == {"rate": 16000, "label": "rate 16000 Hz"}
    assert out["enc"]["ff"] == 8 and out["enc"]["copy"]["rate"] == "${model.sample_rate}"  # a named node comes as it is
    assert out["twice"] == "rate 16000 Hz/rate 16000 Hz"


# --- fuzzing: any nesting of aliases and references is an error or a bounded result, quickly -----

names = st.sampled_from(["a", "b", "c", "model"])
leaf = st.one_of(st.integers(-3, 3), st.text("xyz.${}", max_size=12), st.builds(lambda n, m: f"${{{n}}}{m}", names, st.sampled_from(["", "x", "${a}"])))
trees = st.recursive(leaf, lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(names, kids, max_size=4)), max_leaves=20)


@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(root=st.dictionaries(names, trees, min_size=1, max_size=4), width=st.integers(1, 12), depth=st.integers(1, 12))
def test_fuzz_resolver_is_bounded(root, width, depth):
    shared = root
    for _ in range(depth):  # the same object named ``width`` times per level, as YAML aliases do
        shared = {"k": [shared] * width, "s": "${a}" * width}
    started = time.perf_counter()
    try:
        resolve_references({"a": "y" * 7, "b": root, "c": shared}, "fuzz")
    except ConversionError:
        pass
    assert time.perf_counter() - started < 2
