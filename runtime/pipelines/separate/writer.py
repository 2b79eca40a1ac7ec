"""Stems written as they are separated: a float spool per stem, then the clip policy, then in place.

Blocks go into a float32 RF64 spool beside each destination (a temporary of ``oasr.io.files``'
naming, swept if a killed run left it) while the peak is tracked, so memory does not hold the
stems. The clip policy needs that peak ("rescale" divides the whole stem by
``max(1.01 * peak, 1)``, as demucs' ``prevent_clip``), so when every block is in, each spool is
read back a block at a time into the destination's format in a second temporary, and only when
every stem is complete are they renamed over their destinations. A failure or an interrupt
removes every temporary and every folder made for them: nothing half-written is left.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ...errors import InputError
from ...io.files import file_mode, make_parents, remove_empty, sweep_stale, temp_sibling

BLOCK = 1 << 16  # frames copied at a time from a spool
SUBTYPES = {"int16": "PCM_16", "int24": "PCM_24", "float32": "FLOAT"}


def container(name: str) -> str:
    """The soundfile container of the stem format ``name`` (``oasr.formats.stems``)."""
    from ...formats.registry import get

    return get("stems", name).write


@dataclass(frozen=True)
class StemFiles:
    """Where each stem goes, in which container and sample encoding."""

    paths: Mapping[str, Path]  # stem name -> destination
    format: str = "wav"  # "wav" or "flac"
    encoding: str = "int16"  # "int16", "int24" or "float32" (wav only)

    def __post_init__(self):
        container(self.format)  # an InputError naming the formats when it is none of them
        if self.encoding not in SUBTYPES:
            raise InputError(f"unknown sample encoding {self.encoding!r}; choose {', '.join(SUBTYPES)}")
        if self.format == "flac" and self.encoding == "float32":
            raise InputError("FLAC holds integer samples only: use --int24 (or wav for --float32)")
        dests = [Path(p) for p in self.paths.values()]
        if len(set(dests)) != len(dests):
            raise InputError("two stems would be written to the same file; put {stem} in --filename")


class StemWriter:
    """Use as a context manager: ``write(block)`` with [stems, channels, n] blocks in stem order,
    then ``finish(clip)``; leaving the block without finishing (an error) removes everything."""

    def __init__(self, files: StemFiles, sample_rate: int, channels: int):
        import soundfile as sf

        self.files, self.sample_rate, self.channels = files, sample_rate, channels
        self.names = list(files.paths)
        self.temps: list[Path] = []
        self.created: list[Path] = []
        self.spools = []
        self.peaks = np.zeros(len(self.names))
        self._sf = sf

    def __enter__(self) -> StemWriter:
        try:
            for name in self.names:
                dst = Path(self.files.paths[name])
                if dst.is_dir():
                    raise InputError(f"{dst} is a directory, not a place for the {name} stem")
                self.created += make_parents(dst)
                sweep_stale(dst)
                spool = temp_sibling(dst)
                self.temps.append(spool)
                self.spools.append(
                    self._sf.SoundFile(spool, "w", self.sample_rate, self.channels, "FLOAT", format="RF64")
                )
        except BaseException:
            self._discard()
            raise
        return self

    def write(self, block: np.ndarray) -> None:
        """block: float32 [stems, channels, n]."""
        for i, spool in enumerate(self.spools):
            stem = block[i]
            if stem.shape[-1]:
                self.peaks[i] = max(self.peaks[i], float(np.abs(stem).max()))
            spool.write(np.ascontiguousarray(stem.T))

    def finish(self, clip: str) -> list[tuple[str, Path, float, float]]:
        """Apply ``clip`` and put every stem in place: [(name, path, peak, scale)]."""
        for spool in self.spools:
            spool.close()
        finals, out = [], []
        for name, spool, peak in zip(self.names, self.temps, self.peaks):
            dst = Path(self.files.paths[name])
            final = temp_sibling(dst)
            self.temps.append(final)
            scale = max(1.01 * peak, 1.0) if clip == "rescale" else 1.0
            self._encode(spool, final, scale, clip)
            finals.append((final, dst))
            out.append((name, dst, float(peak), float(scale)))
        for final, dst in finals:
            os.chmod(final, file_mode())
            os.replace(final, dst)
        self._discard(keep_folders=True)
        return out

    def _encode(self, spool: Path, final: Path, scale: float, clip: str) -> None:
        subtype = SUBTYPES[self.files.encoding]
        with self._sf.SoundFile(spool) as src, self._sf.SoundFile(
            final, "w", self.sample_rate, self.channels, subtype, format=container(self.files.format)
        ) as dst:
            for block in src.blocks(BLOCK, dtype="float32"):
                if scale != 1.0:
                    block = block / np.float32(scale)
                if clip == "clamp":
                    block = np.clip(block, -0.99, 0.99)
                dst.write(block)

    def _discard(self, keep_folders: bool = False) -> None:
        for spool in self.spools:
            with contextlib.suppress(Exception):
                spool.close()
        for tmp in self.temps:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        self.temps, self.spools = [], []
        if not keep_folders:
            remove_empty(self.created)

    def __exit__(self, *exc) -> None:
        if self.temps:  # not finished: an error or an interrupt
            self._discard()
