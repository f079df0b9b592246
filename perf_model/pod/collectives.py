"""Collective times on a group's segments (pure functions; seconds from bytes).

``size`` is always the whole buffer one chip holds before a reduce-scatter (or after an
all-gather), or sends in an all-to-all; ``S`` below. Algorithms:

* A ring axis of ``n`` (a torus axis, closed) runs a bidirectional ring: half the data each way,
  so its ring bandwidth is ``2 bw``; a line (no wraparound, or a part of an axis) embeds one ring
  that uses each link both ways: ``bw``; a switch: each chip's ``bw``.
* Reduce-scatter or all-gather over the in-pod segments: all of them at once, each on a share of
  the data in proportion to its ring bandwidth (the multi-dimensional torus collective):
  ``(N - 1) / N * S / sum(ring_bw) + sum((n_i - 1) * latency_i)``, ``N = prod(n_i)``. Then the DCN
  (if the group reaches across pods) on what is left, ``S / N``:
  ``(n - 1) / n * (S / N) / bw_dcn + (n - 1) * latency_dcn``.
* A group that reaches across the DCN on a system with ``dcn_rings = "flat"`` (NCCL's ring
  algorithm: one ring through every member, each of its ``N - 1`` steps waiting on the slowest
  hop) pays ``(N - 1) * max(latency_i)`` instead of the sum over axes; the bandwidth term is the
  same (each node's ring edges across the DCN carry what the hierarchical form sends there).
* ``pieces``: the collective issued as that many separate collectives over the same bytes (ZeRO-3
  gathering each layer, or each weight tensor, on its own): the bandwidth term once, the latency
  term ``pieces`` times.
* All-reduce: a reduce-scatter then an all-gather (twice the time).
* All-to-all: one phase per segment, each moving the whole ``S`` along that axis (dimension-
  order routing): a ring of ``n`` with shortest paths loads its busiest link with ``S n / 8``
  (even ``n``) or ``S (n^2 - 1) / (8 n)`` (odd), a line with ``S n / 4`` or ``S (n^2 - 1) / (4 n)``
  (the middle link), a switch ``(n - 1) / n * S`` per chip; time is that over ``bw``, plus
  ``(n - 1) * latency``.
* Point to point (pipeline stages are neighbours on their first segment): ``S / bw + latency``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from perf_model.pod.topology import Segment

__all__ = ["reduce_scatter", "all_gather", "all_reduce", "all_to_all", "p2p", "ring_bandwidth", "ring_latency"]


def ring_bandwidth(seg: Segment) -> float:
    """Bytes/s one member moves around the group's ring on this segment (module docstring)."""
    return 2.0 * seg.bw if seg.ring and not seg.switch else seg.bw


def ring_latency(segments: Sequence[Segment], *, flat: bool = False) -> float:
    """Seconds of latency in one reduce-scatter (or all-gather) over the group (module docstring)."""
    if not segments:
        return 0.0
    if flat and any(s.dcn for s in segments):
        return (math.prod(s.n for s in segments) - 1) * max(s.latency_s for s in segments)
    return sum((s.n - 1) * s.latency_s for s in segments)


def reduce_scatter(segments: Sequence[Segment], size: float, *, flat: bool = False, pieces: int = 1) -> float:
    """Seconds for a reduce-scatter of ``size`` bytes per chip over the group's segments, issued as
    ``pieces`` collectives, with ``flat`` rings across the DCN (module docstring)."""
    if size <= 0 or not segments:
        return 0.0
    inner = [s for s in segments if not s.dcn]
    outer = [s for s in segments if s.dcn]
    t = 0.0
    n_in = math.prod(s.n for s in inner)
    if inner:
        t += (n_in - 1) / n_in * size / sum(ring_bandwidth(s) for s in inner)
    rest = size / n_in
    for s in outer:
        t += (s.n - 1) / s.n * rest / s.bw
        rest /= s.n
    return t + pieces * ring_latency(segments, flat=flat)


def all_gather(segments: Sequence[Segment], size: float, *, flat: bool = False, pieces: int = 1) -> float:
    """Seconds for an all-gather that ends with ``size`` bytes on every chip (same as reduce-scatter)."""
    return reduce_scatter(segments, size, flat=flat, pieces=pieces)


def all_reduce(segments: Sequence[Segment], size: float, *, flat: bool = False, pieces: int = 1) -> float:
    """Seconds for an all-reduce of ``size`` bytes per chip: reduce-scatter then all-gather."""
    return 2.0 * reduce_scatter(segments, size, flat=flat, pieces=pieces)


def _a2a_load(seg: Segment) -> float:
    """Busiest link's share of ``S`` in one all-to-all phase on ``seg`` (module docstring)."""
    n = seg.n
    if seg.switch:
        return (n - 1) / n
    ring = 8.0 if seg.ring else 4.0
    return n / ring if n % 2 == 0 else (n * n - 1) / (ring * n)


def all_to_all(segments: Sequence[Segment], size: float) -> float:
    """Seconds for an all-to-all in which each chip sends ``size`` bytes spread evenly over the group."""
    if size <= 0:
        return 0.0
    return sum(size * _a2a_load(s) / s.bw + (s.n - 1) * s.latency_s for s in segments)


def p2p(segments: Sequence[Segment], size: float) -> float:
    """Seconds to send ``size`` bytes to the next pipeline stage (0 with one stage)."""
    if size <= 0 or not segments:
        return 0.0
    seg = segments[0]
    return size / seg.bw + seg.latency_s
