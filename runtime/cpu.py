"""The CPU this process runs on: its vendor, its feature flags and the cores it may use.

The one place that probes the CPU. The compute plan (``oasr.precision``, through
``this_cpu()``), the integer kernels (``oasr.quant.modules``) and the thread count
(``oasr.threads``) read it here, so a test can stand in another CPU by patching ``flags`` or
``vendor``. torch is imported only by ``this_cpu``.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

CPUINFO = "/proc/cpuinfo"
CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"


@dataclass(frozen=True)
class CpuInfo:
    """A CPU as plain data: what the compute plan decides from."""

    vendor: str = ""  # vendor_id: GenuineIntel, AuthenticAMD, ...; "" where unknown
    flags: frozenset[str] = frozenset()  # feature flags as /proc/cpuinfo spells them (amx_bf16, avx512_vnni, ...)
    onednn: bool = False  # torch was built with oneDNN (``torch.backends.mkldnn``)


@functools.cache
def _cpuinfo() -> dict[str, str]:
    """The first CPU's fields of /proc/cpuinfo (name -> value); empty where unreadable."""
    fields: dict[str, str] = {}
    try:
        with open(CPUINFO, encoding="ascii", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the first CPU's block ends
                name, _, value = line.partition(":")
                fields.setdefault(name.strip(), value.strip())
    except OSError:
        pass
    return fields


def flags() -> frozenset[str]:
    """The CPU's feature flags; empty where unreadable."""
    return frozenset(_cpuinfo().get("flags", "").split())


def vendor() -> str:
    """The CPU's vendor (GenuineIntel, AuthenticAMD, ...); "" where unreadable."""
    return _cpuinfo().get("vendor_id", "")


def this_cpu() -> CpuInfo:
    """This machine's CPU, with what the torch build can run on it."""
    import torch

    return CpuInfo(vendor=vendor(), flags=flags(), onednn=torch.backends.mkldnn.is_available())


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup CPU quota
    (a container limited to 2 CPUs of a 64-core host gets 2, not 64)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, quota)
    return max(1, cores)


def cgroup_cpu_quota(path: str = CGROUP_CPU_MAX) -> int | None:
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
