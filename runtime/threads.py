"""CPU threads: how many torch uses, how its OpenMP workers wait, and fitting the count to the load.

Two rules; the measurements behind them are in ``benchmarks/threads.md``:

- every command sets a short OpenMP spin (``GOMP_SPINCOUNT=10000``) before torch loads, unless
  the user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` (``apply_wait_policy``);
- the thread count follows the load: at most ``--threads N`` (default: the cores), fewer while
  other processes keep cores busy (``fit_threads``, called between windows).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass

from . import cpu

log = logging.getLogger("oasr")

WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
PROC_STAT = "/proc/stat"
DEFAULT_SPIN_COUNT = "10000"
MIN_INTERVAL = 0.1  # seconds between two looks at the load: /proc/stat counts in 10 ms ticks


def apply_wait_policy() -> bool:
    """Set the short-spin OpenMP wait for this process unless the user chose a policy; starts
    watching the load (see ``fit_threads``).

    OpenMP reads it once, when torch's library is loaded: after ``import torch`` this is too
    late, says so in the log and returns False.
    """
    global _last
    _last = _look()
    if any(name in os.environ for name in WAIT_VARIABLES):
        return False
    if "torch" in sys.modules:
        log.debug("torch is already imported: the OpenMP wait policy stays as it is")
        return False
    os.environ["GOMP_SPINCOUNT"] = DEFAULT_SPIN_COUNT
    return True


def set_threads(threads: int | None = None) -> int:
    """Use at most ``threads`` CPU threads for torch's kernels (None: ``cpu.available_cores()``);
    returns the count in use.

    The count is that, or fewer: the cores other processes kept busy since ``apply_wait_policy``
    (or the last look) are left to them, and ``fit_threads`` keeps following the load. The user's
    own OMP_NUM_THREADS, with None given, is kept as it is. Before torch is imported this only
    sets OMP_NUM_THREADS (torch reads it when it starts), so a command pays for the torch import
    only once it needs a model.
    """
    global _most
    if threads is not None and int(threads) < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    if threads is None and _USER_OMP_THREADS:
        _most = None
        count = _user_count()
    else:
        _most = cpu.available_cores() if threads is None else int(threads)
        count = _fitted(_most, _most)
        _use(count)
    log.info("%d CPU thread(s) for the models%s", count, _why_fewer(threads, count))
    return count


def _why_fewer(threads: int | None, count: int) -> str:
    """Why ``count`` is below what was asked (``threads``; None: the cores), for the log line."""
    if threads is None and _USER_OMP_THREADS:
        return " (OMP_NUM_THREADS)"
    cores = cpu.available_cores()
    reasons = []
    if threads is not None and count < threads and threads > cores:
        reasons.append(f"this process may use {cores} core(s): its CPU affinity and cgroup quota")
    if count < min(threads or cores, cores) and _others_busy:
        reasons.append(f"other processes keep about {_others_busy:.1f} core(s) busy")
    if not reasons:
        return ""
    asked = f"--threads {threads}" if threads is not None else f"{cores} core(s)"
    return f", not {threads or cores} ({asked}): " + "; ".join(reasons)


def _user_count() -> int:
    try:
        return max(1, int(os.environ["OMP_NUM_THREADS"].split(",")[0]))
    except ValueError:
        return cpu.available_cores()


def fit_threads() -> int | None:
    """Between pieces of work (a Whisper window): refit the thread count to the cores other
    processes leave free; returns the count (None: the user's OMP_NUM_THREADS, left alone)."""
    if _most is None:
        return None
    count = _fitted(_most, _in_use or _most)
    if count != _in_use:
        log.info("the load on the cores changed: %d CPU thread(s) now", count)
        _use(count)
    return count


@dataclass(frozen=True)
class _Look:
    wall: float  # monotonic seconds
    busy: float  # CPU seconds the watched cores were busy, by anyone
    own: float  # this process's CPU seconds


_USER_OMP_THREADS = "OMP_NUM_THREADS" in os.environ  # the user's, not one this module set
_last: _Look | None = None  # the last look at the load
_most: int | None = None  # the most threads the count may reach; None: the user's OMP_NUM_THREADS
_in_use: int | None = None
_others_busy = 0.0  # cores other processes kept busy at the last look


def _use(count: int) -> None:
    global _in_use
    _in_use = count
    if "torch" not in sys.modules:
        os.environ["OMP_NUM_THREADS"] = str(count)
        return
    import torch

    if torch.get_num_threads() != count:
        torch.set_num_threads(count)


def _fitted(most: int, unmeasured: int) -> int:
    """``most`` threads, or the process's cores less those other processes kept busy since the
    last look when that is fewer (at least 1); ``unmeasured`` when too little time has passed to
    tell."""
    global _last
    now = _look()
    if now is None or _last is None or now.wall - _last.wall < MIN_INTERVAL:
        _last = _last or now
        return unmeasured
    global _others_busy
    others = max(0.0, (now.busy - _last.busy) - (now.own - _last.own)) / (now.wall - _last.wall)
    _last, _others_busy = now, others
    return max(1, min(most, cpu.available_cores() - int(others + 0.5)))


def _watched_cpus() -> set[int] | None:
    """The CPUs whose load says what this process gets: its affinity, unless a cgroup quota
    caps it below that (a container's share of a larger host, whose other tenants /proc/stat
    shows alike)."""
    try:
        cpus = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return None
    quota = cpu.cgroup_cpu_quota()
    return None if quota is not None and quota < len(cpus) else cpus


def _look() -> _Look | None:
    """Now: the busy time of the watched CPUs and this process's CPU time; None where unreadable."""
    cpus = _watched_cpus()
    if cpus is None:
        return None
    ticks = 0
    try:
        with open(PROC_STAT, encoding="ascii") as f:
            for line in f:
                name, _, rest = line.partition(" ")
                if not name.startswith("cpu") or not name[3:].isdigit() or int(name[3:]) not in cpus:
                    continue
                # user nice system idle iowait irq softirq steal (guest time is inside user)
                fields = [int(v) for v in rest.split()[:8]]
                ticks += sum(fields) - fields[3] - fields[4]
    except (OSError, ValueError):
        return None
    return _Look(time.monotonic(), ticks / os.sysconf("SC_CLK_TCK"), time.process_time())
