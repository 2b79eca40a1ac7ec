"""``oasr.separate``: a track's stems by an HTDemucs model (or a bag of them), as demucs makes them.

The steps of ``demucs.separate``: the track is read at the model's rate and channels
(``track.py``), normalised by the mean and std of its mono mix, separated by demucs'
``apply_model`` policy run as a stream (``overlap.py``), de-normalised, and each stem given the
clip policy. Stems go to files as segments finish (``writer.py``) when ``files`` says where, else
they are returned in memory.

Memory: per member and shift under two segments of every source (about 11 MB for htdemucs'
7.8 s x 4 sources x 2 channels), plus one forward pass, plus the track's samples while it is
short (``SPOOL_SAMPLES`` values: under two minutes of 44.1 kHz stereo); a longer decoded track
is on disk, read a window at a time, and the stems are on disk, so memory does not grow with the
track (a caller's own array is used as it is).
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ...errors import CapabilityError, InputError
from ...loading import load_pretrained
from ...options import SeparateOptions
from ...results import Stem, Stems
from .overlap import Plan, stream
from .track import Track, mix_stats, read_track
from .writer import StemFiles, StemWriter

log = logging.getLogger("oasr")

Progress = Callable[[float, float], None]
MAX_SHIFT_SECONDS = 0.5  # demucs' shifts move the track by up to half a second


def output_names(sources: tuple[str, ...], options: SeparateOptions) -> tuple[str, ...]:
    """The stems ``options`` asks of a model with ``sources``; an error naming them when it asks for others."""
    wanted = [options.two_stems] if options.two_stems is not None else list(options.stems or sources)
    unknown = [s for s in wanted if s not in sources]
    if unknown:
        raise CapabilityError(f"the model separates {', '.join(sources)}; it has no {', '.join(unknown)} stem")
    if options.two_stems is not None:
        return (options.two_stems, f"no_{options.two_stems}")
    return tuple(dict.fromkeys(wanted))


def separate(
    audio: str | Path | bytes | np.ndarray | torch.Tensor,
    model: Any = "htdemucs",
    options: SeparateOptions = SeparateOptions(),
    *,
    sample_rate: int | None = None,
    files: StemFiles | None = None,
    device: str | torch.device | None = "auto",
    dtype: str | torch.dtype | None = "auto",
    progress: Progress | None = None,
) -> Stems:
    """The stems of ``audio`` by an HTDemucs ``model``.

    ``audio``: a path, ``"-"`` for stdin, encoded bytes, or samples ([n] or [channels, n]) at
    ``sample_rate`` Hz (default: the model's). ``model``: a ``LoadedModel``, a registry name, a
    native bundle or a demucs ``.th``/bag yaml. ``files``: where to write each stem (its names
    are the stems the options ask for); None returns them in ``Stem.samples``.
    ``progress(done_seconds, total_seconds)`` as stretches of the track are finished.
    """
    loaded = load_pretrained(model, task="separate", device=device, dtype=dtype)
    net = loaded.model
    config = net.config
    sources = tuple(config.sources)
    names = output_names(sources, options)
    if files is not None and set(files.paths) != set(names):
        raise InputError(f"files name the stems {', '.join(files.paths)}; the options ask for {', '.join(names)}")
    rate, channels = config.samplerate, config.audio_channels
    samples, source = read_track(audio, rate, channels, input_rate=sample_rate)
    plans = _plans(net, options, loaded.model.config)
    first = next(net.parameters())
    # demucs.separate normalises the whole track by its mono mix before apply_model: the lanes
    # read windows normalised by the mix's mean and std, taken in a first pass.
    mean, std = mix_stats(samples)
    if not std > 0:
        std = 1.0  # digital silence: nothing to scale (demucs would divide by zero)
    track = Track(samples, mean, std, first.device, first.dtype)
    mean, std = track.mean, track.std
    total = samples.shape[-1] / rate
    results: list[np.ndarray] = []
    with torch.inference_mode(), _writer(files, names, rate, channels) as writer:
        done = 0
        blocks = stream(
            plans, track, sources=len(sources), overlap=options.overlap, shifts=options.shifts,
            max_shift=int(MAX_SHIFT_SECONDS * rate), rng=random.Random(options.seed), batch=options.batch_size,
        )
        for block in blocks:
            block = block.float() * std + mean  # [S, C, n]
            out = _outputs(block, names, sources, options).cpu().numpy()
            if writer is not None:
                writer.write(out)
            else:
                results.append(out)
            done += block.shape[-1]
            if progress is not None:
                progress(done / rate, total)
        if writer is not None:
            written = writer.finish(options.clip)
            stems = tuple(Stem(name=n, path=str(p), peak=peak, scale=scale) for n, p, peak, scale in written)
    if files is None:
        whole = np.concatenate(results, axis=-1) if results else np.zeros((len(names), channels, 0), np.float32)
        stems = tuple(_clipped(n, whole[i], options.clip) for i, n in enumerate(names))
    return Stems(
        stems=stems, sample_rate=rate, channels=channels, duration=total,
        provenance=loaded.result_provenance(options), source=source,
    )


def _plans(net, options: SeparateOptions, config) -> list[Plan]:
    plans = []
    for m, member in enumerate(config.members):
        valid = member.segment_samples
        if options.segment is not None:
            valid = int(options.segment * member.samplerate)
            if valid > member.segment_samples or valid < 1:
                raise InputError(
                    f"--segment {options.segment:g} s: HTDemucs windows are at most its training segment, "
                    f"{member.segment_samples / member.samplerate:g} s"
                )
        plans.append(Plan(forward=lambda x, m=m: net(x, m), valid=valid, weights=config.weights[m]))
    return plans


def _outputs(block: torch.Tensor, names, sources, options: SeparateOptions) -> torch.Tensor:
    """[S, C, n] -> the requested stems [len(names), C, n] (no_X: the sum of the other sources)."""
    if options.two_stems is not None:
        k = sources.index(options.two_stems)
        rest = torch.zeros_like(block[k])
        for i in range(len(sources)):  # summed in source order, as demucs does
            if i != k:
                rest += block[i]
        return torch.stack([block[k], rest])
    return block[[sources.index(n) for n in names]]


def _clipped(name: str, wav: np.ndarray, clip: str) -> Stem:
    peak = float(np.abs(wav).max()) if wav.size else 0.0
    scale = max(1.01 * peak, 1.0) if clip == "rescale" else 1.0
    if scale != 1.0:
        wav = wav / np.float32(scale)
    if clip == "clamp":
        wav = np.clip(wav, -0.99, 0.99)
    return Stem(name=name, peak=peak, scale=scale, samples=np.ascontiguousarray(wav, dtype=np.float32))


class _NoWriter:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


def _writer(files: StemFiles | None, names, rate: int, channels: int):
    if files is None:
        return _NoWriter()
    return StemWriter(StemFiles({n: files.paths[n] for n in names}, files.format, files.encoding), rate, channels)
