"""CPU threads: how many torch uses, and how its OpenMP workers wait between parallel regions.

torch's CPU build runs its kernels on GNU OpenMP workers that, by default, spin on a core for a
while after each parallel region. A decoding step is hundreds of short regions, so when another
process holds one of the cores a spinning worker takes turns from it, and the step waits for the
worker that is not scheduled. A passive wait (idle workers sleep) holds under contention: with one
of 2 cores kept busy by another process (``benchmarks/transcribe.py --busy``), ``oasr transcribe``
on sample.wav slowed 1.19x (int8) and 1.28x (fp32), faster-whisper 1.28x (int8) and 2.79x (fp32);
without it Piper synthesis was measured 6.4x slower. So every oasr command sets it before torch
loads; OMP_WAIT_POLICY or GOMP_SPINCOUNT set by the user win.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger("oasr")

WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"
DEFAULT_WAIT_POLICY = "PASSIVE"


def apply_wait_policy() -> bool:
    """Set the passive OpenMP wait policy for this process unless the user chose one.

    OpenMP reads it once, when torch's library is loaded: after ``import torch`` this is too
    late, says so in the log and returns False.
    """
    if any(name in os.environ for name in WAIT_VARIABLES):
        return False
    if "torch" in sys.modules:
        log.debug("torch is already imported: the OpenMP wait policy stays as it is")
        return False
    os.environ["OMP_WAIT_POLICY"] = DEFAULT_WAIT_POLICY
    return True


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup CPU quota
    (a container limited to 2 CPUs of a 64-core host gets 2, not 64)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, quota)
    return max(1, cores)


def _cgroup_cpu_quota(path: str = CGROUP_CPU_MAX) -> int | None:
    """cgroup v2 ``cpu.max`` ("max 100000" or "200000 100000") as whole CPUs, rounded up."""
    try:
        with open(path, encoding="ascii") as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, -(-int(quota) // int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def set_threads(threads: int | None = None) -> int:
    """Use ``threads`` CPU threads for torch's kernels (None: ``available_cores()``); returns it.

    Before torch is imported this only sets OMP_NUM_THREADS (torch reads it when it starts), so a
    command pays for the torch import only once it needs a model; None leaves a user's own
    OMP_NUM_THREADS alone.
    """
    count = available_cores() if threads is None else int(threads)
    if count < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    if "torch" not in sys.modules:
        if threads is not None or "OMP_NUM_THREADS" not in os.environ:
            os.environ["OMP_NUM_THREADS"] = str(count)
    else:
        import torch

        if torch.get_num_threads() != count:
            torch.set_num_threads(count)
    log.info("%d CPU thread(s) for the models", count)
    return count
