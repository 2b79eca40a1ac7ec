"""demucs' ``apply_model`` as a stream: overlapping segments, triangular weights, shifts, bag weights.

The arithmetic is apply_model's, in the same order (so results agree to float rounding):

- a network sees windows of ``valid`` samples (its segment, or a shorter ``--segment``); chunks
  start every ``stride = int((1 - overlap) * valid)`` samples and are ``l = min(valid, left)``
  long; a chunk's window is centred on it (``(valid - l) // 2`` samples of real neighbours or
  zeros before it) and the network's output is cut back to the chunk the same way;
- each chunk's output is weighted by a triangle (``1..valid/2`` up, then down, over its max)
  cut to ``l``, summed, and divided by the summed weights;
- with ``shifts`` = K > 0, the track is padded by half a second of zeros on both sides, and K
  times a random offset ``o`` in [0, max_shift] is drawn; the separation of the padded track
  from ``o`` on is shifted back and the K results averaged;
- a bag runs each member so, multiplies its estimate of source s by ``weights[m][s]``, sums
  and divides by the weights' total per source.

Streaming: each (member, shift) pair is a ``Lane`` that separates chunk after chunk and keeps
only the stretch not yet final (under two segments of S sources x channels floats, in buffers
it reuses). A sample is final in a lane once the next chunk starts past it; ``stream`` runs the
lane that lags most and yields every stretch all lanes have finished, so memory stays within
lanes x 2 segments whatever the track's length.

Offsets are drawn as demucs draws them from Python's ``random``: per member, K offsets, and
between two offsets one draw per forward pass of the previous one (each HTDemucs forward draws its
transformer's position shift, ``randrange(1)``, from the same generator). With the same seed the
offsets are demucs' own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, Sequence

import torch
from torch import Tensor

Forward = Callable[[Tensor], Tensor]  # windows [B, C, valid] -> [B, S, C, valid]


class Frames(Protocol):
    """The track as lanes read it: ``read(a, b)`` is its samples [channels, b - a] (0 <= a < b
    <= length) as the networks take them; ``separate.track.Track`` reads them from memory or disk."""

    length: int
    channels: int
    device: torch.device
    dtype: torch.dtype

    def read(self, a: int, b: int) -> Tensor: ...


class _InMemory:
    """A [C, N] tensor as Frames."""

    def __init__(self, track: Tensor):
        self.track, self.length, self.channels = track, track.shape[-1], track.shape[0]
        self.device, self.dtype = track.device, track.dtype

    def read(self, a: int, b: int) -> Tensor:
        return self.track[:, a:b]


def triangle(valid: int, device=None) -> Tensor:
    """apply_model's transition weights: a triangle peaking mid-segment, max 1."""
    w = torch.cat([torch.arange(1, valid // 2 + 1, device=device), torch.arange(valid - valid // 2, 0, -1, device=device)])
    return w / w.max()


@dataclass(frozen=True)
class Plan:
    """One network's share of the work: its forward, window length and bag weights per source."""

    forward: Forward
    valid: int  # samples per window
    weights: tuple[float, ...]


class Lane:
    """One network at one time offset: chunks in order, overlap-added, finished stretches handed out.

    Coordinates: ``y`` is the lane's own time axis (the track itself, or the padded track from
    the offset on); track sample ``x`` is ``y + base`` (base = offset - max_shift <= 0 with shifts).
    """

    def __init__(self, plan: Plan, track: Frames, overlap: float, base: int, length: int, sources: int, batch: int):
        self.plan, self.track, self.base, self.length, self.batch = plan, track, base, length, batch
        self.stride = int((1 - overlap) * plan.valid)
        self.weight = triangle(plan.valid, track.device)
        self.next = 0  # y of the next chunk to run
        self.start = 0  # y of acc[..., 0]: everything before it has been handed out
        # acc[..., :held] and wsum[:held]: the weighted sums from start on. The buffers are kept and
        # their tail moved to the front as stretches are handed out (grown only when a chunk needs
        # more room), so the heap is not fragmented by a new buffer of a new size every chunk.
        self.acc = torch.zeros(sources, track.channels, 0, device=track.device)
        self.wsum = torch.zeros(0, device=track.device)
        self.held = 0

    @property
    def chunks(self) -> int:
        return len(range(0, self.length, self.stride))

    @property
    def done(self) -> bool:
        return self.next >= self.length

    @property
    def final_x(self) -> int:
        """Track samples before this one are final in this lane."""
        return (self.length if self.done else self.next) + self.base

    def _window(self, off: int, l: int) -> Tensor:
        """The track's samples [C, valid] around chunk y = off (zeros outside the track)."""
        valid = self.plan.valid
        lo = self.base + off - (valid - l) // 2
        a, b = max(lo, 0), min(lo + valid, self.track.length)
        if a >= b:
            return torch.zeros(self.track.channels, valid, device=self.track.device, dtype=self.track.dtype)
        return torch.nn.functional.pad(self.track.read(a, b), (a - lo, lo + valid - b))

    def step(self) -> None:
        """Run the next ``batch`` chunks through the network and add them in."""
        offs = list(range(self.next, self.length, self.stride))[: self.batch]
        lens = [min(self.length - off, self.plan.valid) for off in offs]
        windows = torch.stack([self._window(o, l) for o, l in zip(offs, lens)])
        out = self.plan.forward(windows)
        del windows  # the network's intermediates are gone; its input need not outlive them
        end = offs[-1] + lens[-1]
        need = end - self.start
        if need > self.acc.shape[-1]:
            self.acc = torch.cat([self.acc[..., : self.held], self.acc.new_empty(*self.acc.shape[:2], need - self.held)], -1)
            self.wsum = torch.cat([self.wsum[: self.held], self.wsum.new_empty(need - self.held)])
        if need > self.held:
            self.acc[..., self.held : need] = 0
            self.wsum[self.held : need] = 0
            self.held = need
        valid = self.plan.valid
        for chunk, off, l in zip(out, offs, lens):
            trim = (valid - l) // 2
            at = off - self.start
            self.acc[..., at : at + l] += self.weight[:l] * chunk[..., trim : trim + l]
            self.wsum[at : at + l] += self.weight[:l]
        self.next = offs[-1] + self.stride

    def take(self, upto_x: int) -> Tensor:
        """The lane's estimate [S, C, n] of track samples [start_x, upto_x), which must be final;
        positions before the track (a shift's left padding) are dropped."""
        upto = upto_x - self.base
        n = upto - self.start
        out = self.acc[..., :n] / self.wsum[:n]
        for a in range(n, self.held, n):  # the rest to the front, in pieces that do not overlap
            b = min(a + n, self.held)
            self.acc[..., a - n : b - n] = self.acc[..., a:b]
            self.wsum[a - n : b - n] = self.wsum[a:b]
        self.held -= n
        skip = max(0, -self.base - self.start)  # y before x = 0
        self.start = upto
        return out[..., skip:]


def draw_offsets(rng: random.Random, plans: Sequence[Plan], shifts: int, length: int, max_shift: int, overlap: float) -> list[list[int]]:
    """Per plan, the ``shifts`` offsets demucs would draw (see the module's note)."""
    offsets = []
    for plan in plans:
        stride = int((1 - overlap) * plan.valid)
        mine = []
        for _ in range(shifts):
            o = rng.randint(0, max_shift)
            mine.append(o)
            for _ in range(len(range(0, length + max_shift - o, stride))):
                rng.randrange(1)  # the draw each demucs forward makes
        offsets.append(mine)
    return offsets


def stream(plans: Sequence[Plan], track: Tensor | Frames, *, sources: int, overlap: float, shifts: int, max_shift: int,
           rng: random.Random, batch: int = 1) -> Iterator[Tensor]:
    """Separate ``track`` ([C, N], or Frames of N samples): yields consecutive [S, C, n] stretches
    covering all N samples."""
    if isinstance(track, Tensor):
        track = _InMemory(track)
    length = track.length
    lanes: list[list[Lane]] = []
    if shifts:
        for plan, offs in zip(plans, draw_offsets(rng, plans, shifts, length, max_shift, overlap)):
            lanes.append([Lane(plan, track, overlap, o - max_shift, length + max_shift - o, sources, batch) for o in offs])
    else:
        lanes = [[Lane(plan, track, overlap, 0, length, sources, batch)] for plan in plans]
    totals = [sum(plan.weights[s] for plan in plans) for s in range(sources)]
    flat = [lane for group in lanes for lane in group]
    emitted = 0
    while emitted < length:
        lagging = min((lane for lane in flat if not lane.done), key=lambda lane: lane.final_x, default=None)
        if lagging is not None:
            lagging.step()
        upto = min(length, min(lane.final_x for lane in flat))
        if upto <= emitted:
            continue
        estimate: Tensor | float = 0.0
        for plan, group in zip(plans, lanes):
            out: Tensor | float = 0.0
            for lane in group:
                out = out + lane.take(upto)
            if shifts:
                out = out / shifts
            for s, w in enumerate(plan.weights):
                out[s] *= w
            estimate = estimate + out
        for s in range(sources):
            estimate[s] /= totals[s]
        emitted = upto
        yield estimate
