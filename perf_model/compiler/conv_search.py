"""The conv tiling search (internal): every candidate tiling scored at once, ranked, the first that fits.

The tiling is searched here (all tilings that fit, in whole output rows or whole images, filter
tiles of whole array columns and channel blocks, both loop orders with K innermost): the fewest
estimated cycles, then DRAM bytes, then run cycles. A band of one output row that does not fit the ifmap is
infeasible, with a reason naming the op and the words it needs. DRAM bytes in closed form
(``_dram_bytes``) equal the run-by-run count (``_walk_bytes``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from accel_spec.config import ArrayConfig
from perf_model.compiler.conv_candidates import _CACHE_SIZE, _Candidates, stacked_candidates
from perf_model.compiler.conv_geometry import (
    ConvTiling,
    _Geometry,
    _room,
    _run_shapes,
    _sizes,
    conv_served,
    weight_tiles_held,
)
from perf_model.compiler.conv_shapes import shape_key
from perf_model.program_timing import axi_data_bytes, dram_rate
from workloads.ops import Conv2d

__all__ = ["conv_tiling", "conv_tilings", "conv_estimate", "shape_key"]

def _dram_bytes(g: _Geometry, t: ConvTiling, requant: bool) -> int:
    """DRAM bytes of tiling ``t``: each band, weight tile and output tile as the schedule moves them,
    in closed form (equal to :func:`_walk_bytes`, run by run). A band stays for the next run when
    its output rows and channel words are the same (the next filter tile's first channel block is
    the last one's, output rows outer or a single row tile); a weight tile when the next run is the
    same tile (a filter tile of one run, filters outer or a single filter tile)."""
    cfg = g.config
    ib = cfg.input_bits // 8
    out = ib if requant else (4 if cfg.acc_bits <= 32 else 8)
    bands, _, filters = _sizes(g, t)
    mt, tap_tiles = len(bands), len(g.tap_tiles(t.taps_t))
    words = sum(span for span, *_ in filters)
    if t.order == "mn" or mt == 1:
        words -= sum(first * shared for _, first, shared, _ in filters)
    a = (sum(bands) * g.conv.w + mt * g.extra) * g.a_word_bytes * words
    runs = [-(-span // t.c_t) * tap_tiles for span, *_ in filters]  # weight tiles of a filter tile
    weights = [g.taps * span * g.kl * g.row_bytes(filt, ib) for span, _, _, filt in filters]
    # A weight tile stays while it is one of the last two (the buffer's halves, ``conv._place``; the
    # last one single buffered): the runs of an output tile (filters inner) or of a filter tile
    # (filters outer) of at most that many tiles load theirs once.
    held = weight_tiles_held(cfg)
    if t.order == "mn":
        b = sum(weights) if sum(runs) <= held else mt * sum(weights)
    else:
        b = sum(w if r <= held else mt * w for w, r in zip(weights, runs, strict=True))
    return a + b + g.M * sum(g.row_bytes(filt, out) for *_, filt in filters)


def _walk_bytes(g: _Geometry, t: ConvTiling, requant: bool) -> int:
    """DRAM bytes of tiling ``t``, run by run (any conv)."""
    R, cfg = g.R, g.config
    ib = cfg.input_bits // 8
    out = ib if requant else (4 if cfg.acc_bits <= 32 else 8)
    held_a = held_b = other_b = None
    total = 0
    for tile, part in g.tiles(t):
        m0, m1, k0, k1, n0, n1, _ = tile
        key_a = (m0, m1, part[:2])
        if key_a != held_a:
            held_a = key_a
            oy0, oy1 = m0 // g.out_w, -(-m1 // g.out_w)
            total += (g.band(oy0, oy1)[1] * g.conv.w + g.extra) * (part[1] - part[0]) * g.a_word_bytes
        key_b = (k0, k1, n0, n1)
        if key_b != held_b:  # loaded unless the other half holds it (``conv._place``; double buffered)
            if key_b != other_b or weight_tiles_held(cfg) < 2:
                total += (k1 - k0) // R * g.kl * g.row_bytes(n1 - n0, ib)
            other_b, held_b = held_b, key_b
        w0, w1 = g.filter_words(n0, n1)
        if k1 == (w1 - w0) * g.taps * R:  # the output tile's last run: stored
            total += (m1 - m0) * g.row_bytes(n1 - n0, out)
    return total


def conv_tiling(config: ArrayConfig, conv: Conv2d, *, requant: bool = False,
                ifmap_words: int | None = None, pack: bool = True) -> ConvTiling:
    """The tiling ``compile_conv`` uses (module docstring), or an infeasible one with its reason;
    ``ifmap_words``: the ifmap words the bands may use (default all; network links hold the rest);
    ``pack=False``: one tap a word, no tap packing (an input already on chip has no sliding words).

    The candidates' order by score (:func:`_estimate`, then :func:`_dram_bytes`, then loop order)
    does not depend on the buffer sizes, which only decide which candidates fit: it is kept per
    design fields the scores see and conv (:func:`_ranking`), and a design takes the first
    candidate that fits its buffers."""
    why = conv_served(config)
    if why:
        return ConvTiling("infeasible", why)
    room = _room(config)
    if ifmap_words is not None:
        room = (ifmap_words // 2 if config.double_buffered else ifmap_words, *room[1:])
    best, c = _ranking(config, conv, requant, pack)
    words = _needs(best, c)
    fits = (words[0] <= room[0]) & (words[1] <= room[1]) & (words[2] <= room[2])
    need = c.smallest_band
    if fits.any():
        at = int(best[int(fits.argmax())])
        i_c, i_r, i_n, i_t, order = np.unravel_index(at, c.shape)
        return ConvTiling("ok", "", c.levels[1][i_r], c.levels[2][i_n], c.levels[0][i_c], c.levels[3][i_t],
                          ("mn", "nm")[int(order)], int(c.dram[at]))
    what = conv.name or f"conv {conv.kh}x{conv.kw} on {conv.h}x{conv.w}x{conv.c_in}"
    return ConvTiling("infeasible", f"{what}: the band of one output row with one channel word per pixel needs "
                                    f"{need} ifmap words (and one tap {config.rows} weight words), more than the "
                                    f"{room[0]} ifmap / {room[1]} weight words a tile may use")


def conv_tilings(config: ArrayConfig, conv: Conv2d, rooms: np.ndarray, *, requant: bool = False
                 ) -> tuple[np.ndarray, list[ConvTiling]]:
    """:func:`conv_tiling` of many designs at once: designs that see ``config``'s array (every
    field the ranking sees: :func:`_ranking`) and differ in their buffers only.

    Args:
        config: one of the designs (a weight-stationary one, ``conv_served``); its buffer sizes are
            not read.
        conv: the conv.
        rooms: ``(D, 3)`` words a tile may use in the ifmap, weight and ofmap buffers per design
            (``conv_geometry._room``).
        requant: the output leaves through the output stage.

    Returns:
        ``(index, tilings)``: per design the index of its tiling in ``tilings`` (the distinct
        feasible tilings chosen), or -1 where none fits (:func:`conv_tiling`'s infeasible case).
        Each design's tiling equals ``conv_tiling`` on it: the first candidate of the one ranking
        that fits its rooms, found for every design at once (up to ``_FEW`` designs: the least
        candidate that fits, :func:`_first_ranked`, with no ranking; more: every ranked candidate
        checked on each, or, many, :func:`_first_fits`).
    """
    if len(rooms) <= _FEW:
        _, c = _keyed(config, conv, requant, True)
        flat, picks = _first_ranked(config, conv, requant, rooms)
        at = {f: i for i, f in enumerate(picks.tolist())}
        index = np.array([at.get(f, -1) for f in flat.tolist()], dtype=np.int64)
    else:
        best, c = _ranking(config, conv, requant, True)
        need = _needs(best, c)
        if len(rooms) * len(best) <= _DIRECT:  # few designs: each one's first fitting candidate directly
            fits = (need[0] <= rooms[:, :1]) & (need[1] <= rooms[:, 1:2]) & (need[2] <= rooms[:, 2:])
            chosen = np.where(fits.any(axis=1), fits.argmax(axis=1), len(best))
        else:
            chosen = _first_fits(best, need, rooms)
        ranked, index = np.unique(chosen, return_inverse=True)
        index = index.reshape(-1).astype(np.int64)
        if ranked[-1] == len(best):  # no candidate fits some designs
            index[index == len(ranked) - 1] = -1
            ranked = ranked[:-1]
        picks = best[ranked]
    tilings: list[ConvTiling] = []
    for flat in picks.tolist():
        i_c, i_r, i_n, i_t, order = np.unravel_index(flat, c.shape)
        tilings.append(ConvTiling("ok", "", c.levels[1][i_r], c.levels[2][i_n], c.levels[0][i_c], c.levels[3][i_t],
                                  ("mn", "nm")[int(order)], int(c.dram[flat])))
    return index, tilings


#: Designs up to which :func:`conv_tilings` finds each one's tiling without ranking the candidates
#: (:func:`_first_ranked`; a sweep's array groups are mostly one or two designs).
_FEW = 4
#: Designs times candidates up to which :func:`conv_tilings` checks every candidate on every
#: design (a group's few designs) instead of placing the candidates in the grid of the rooms.
_DIRECT = 1 << 17


def _first_fits(best: np.ndarray, need: np.ndarray, rooms: np.ndarray) -> np.ndarray:
    """Per design (``rooms``, ``(D, 3)``), the position in ``best`` of the first candidate whose
    ``need`` (``(3, K)``, ranked) its rooms hold, ``len(best)`` for none: each candidate placed in
    the grid of the distinct rooms it needs, the first per cell, then the least over every cell a
    design's rooms cover."""
    levels, at, sizes = [], [], []
    for i in range(3):
        values, inverse = np.unique(rooms[:, i], return_inverse=True)
        levels.append(np.searchsorted(values, need[i], side="left"))  # a candidate fits rooms >= values[level]
        at.append(inverse.reshape(-1))
        sizes.append(len(values))
    ok = (levels[0] < sizes[0]) & (levels[1] < sizes[1]) & (levels[2] < sizes[2])
    position = np.flatnonzero(ok)
    cell = (levels[0][ok] * sizes[1] + levels[1][ok]) * sizes[2] + levels[2][ok]
    first = np.full(sizes[0] * sizes[1] * sizes[2], len(best), dtype=np.int64)
    cells, seen = np.unique(cell, return_index=True)  # the first (best ranked) candidate per cell
    first[cells] = position[seen]
    grid = first.reshape(sizes)
    for axis in range(3):  # rooms at least a cell's fit every candidate that cell's fit
        grid = np.minimum.accumulate(grid, axis=axis)
    return grid[at[0], at[1], at[2]]


def infeasible_reason(config: ArrayConfig, conv: Conv2d, room: tuple[int, int, int], requant: bool = False) -> str:
    """:func:`conv_tiling`'s reason when no tiling fits ``room`` (the words a tile may use)."""
    return f"{reason_subject(conv)}: {infeasible_detail(config, conv, room, requant)}"


def reason_subject(conv: Conv2d) -> str:
    """How an infeasible reason names ``conv``: its name, else its shape."""
    return conv.name or f"conv {conv.kh}x{conv.kw} on {conv.h}x{conv.w}x{conv.c_in}"


def infeasible_detail(config: ArrayConfig, conv: Conv2d, room: tuple[int, int, int], requant: bool = False) -> str:
    """:func:`infeasible_reason` after the conv's name: the same for every conv of one shape."""
    _, c = _keyed(config, conv, requant, True)
    return (f"the band of one output row with one channel word per pixel needs "
            f"{c.smallest_band} ifmap words (and one tap {config.rows} weight words), more than the "
            f"{room[0]} ifmap / {room[1]} weight words a tile may use")


def _needs(best: np.ndarray, c: _Candidates) -> np.ndarray:
    """``(3, K)`` ifmap, weight and ofmap words each candidate needs, in ranked order (kept per ranking)."""
    key = id(best)
    held = _NEEDS.get(key)
    if held is not None and held[0] is best:
        return held[1]
    i_c, i_r, i_n, i_t, _ = np.unravel_index(best, c.shape)
    need = np.stack([c.band[i_c, i_r], c.weight[i_c, i_n, i_t], c.ofmap[i_r, i_n]]).astype(np.int64)
    if len(_NEEDS) >= 2 * _CACHE_SIZE:
        _NEEDS.clear()
    _NEEDS[key] = (best, need)
    return need


_RANKINGS: dict[tuple[object, ...], np.ndarray] = {}
_CANDIDATES: dict[tuple[object, ...], _Candidates] = {}
_NEEDS: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _ranking(config: ArrayConfig, conv: Conv2d, requant: bool, pack: bool = True) -> tuple[np.ndarray, _Candidates]:
    """The candidates (:class:`_Candidates`) and their flat indices best first: the fewest
    estimated cycles, then DRAM bytes, then run cycles (a DMA-bound estimate ties tilings whose
    runs differ), then loop order. Kept per conv and the design fields a
    score sees (not the buffer sizes, which only decide which candidates fit): the candidates per
    array, bits, shadow and buffering (the weight tiles a buffer holds), their order per DRAM rate too."""
    ranked_key, c = _keyed(config, conv, requant, pack)
    best = _RANKINGS.get(ranked_key)
    if best is None:
        if len(_RANKINGS) >= 2 * _CACHE_SIZE:
            _RANKINGS.clear()
        score = _score(config, c, ranked_key[-1])
        best = _RANKINGS[ranked_key] = np.lexsort((np.arange(len(score)), c.compute, c.dram, score)).astype(np.int32)
    return best, c


def _keyed(config: ArrayConfig, conv: Conv2d, requant: bool, pack: bool) -> tuple[tuple[Any, ...], _Candidates]:
    """The key of :func:`_ranking` (its last field the bytes a cycle the estimate moves) and the
    candidates (kept per that key without the rate)."""
    key, out_b = candidates_key(config, conv, requant, pack)
    c = _CANDIDATES.get(key)
    if c is None:
        if len(_CANDIDATES) >= _CACHE_SIZE:
            _CANDIDATES.clear()
        c = _CANDIDATES[key] = _candidates(_Geometry(config, conv, pack=pack), out_b)
    W, rate = _bus(config)
    return (*key, float(rate if rate is not None else W)), c  # ``_Geometry.bytes_per_cycle``


def candidates_key(config: ArrayConfig, conv: Conv2d, requant: bool, pack: bool) -> tuple[tuple[Any, ...], int]:
    """What the candidates of ``conv`` on ``config`` depend on (:data:`_CANDIDATES`' key), and the
    bytes of an output lane."""
    out_b = config.input_bits // 8 if requant else (4 if config.acc_bits <= 32 else 8)
    # ``_Geometry``'s tap packing is set by the array, the bus, the bits, the dataflow and the conv
    # (``pack_taps``): the key holds those and the ``pack`` asked for, so a hit builds no geometry.
    return (config.rows, config.cols, _bus(config)[0], config.input_bits, out_b, config.shadow_stationary,
            shape_key(conv), pack, config.double_buffered, config.dataflow), out_b


def _score(config: ArrayConfig, c: _Candidates, bytes_per_cycle: float) -> np.ndarray:
    """Each candidate's estimated cycles (:func:`_estimate`), the ranking's first key."""
    dma = c.dram / bytes_per_cycle
    return np.trunc(np.maximum(c.compute, dma) if config.double_buffered else c.compute + dma)


def _first_ranked(config: ArrayConfig, conv: Conv2d, requant: bool, rooms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per design (``rooms``, ``(D, 3)``), the flat index of the first candidate of :func:`_ranking`
    that its rooms hold, -1 for none, without the ranking: the least ``(estimate, DRAM bytes, run
    cycles, index)`` among the candidates that fit (a few designs: cheaper than sorting them all).
    Returns those indices and the distinct ones, in ranked order."""
    ranked_key, c = _keyed(config, conv, requant, True)
    best = _RANKINGS.get(ranked_key)
    score = _score(config, c, ranked_key[-1]) if best is None else None
    out = np.full(len(rooms), -1, dtype=np.int64)
    keys = [k for k in (score, c.dram, c.compute) if k is not None]  # (the score when not ranked yet)
    for d, (r0, r1, r2) in enumerate(rooms.tolist()):
        fits = ((c.band[:, :, None, None, None] <= r0) & (c.weight[:, None, :, :, None] <= r1)
                & (c.ofmap[None, :, :, None, None] <= r2))
        if best is not None:  # ranked already: the first that fits
            fits = np.broadcast_to(fits, c.shape).reshape(-1)[best]
            if fits.any():
                out[d] = best[int(fits.argmax())]
            continue
        on = np.flatnonzero(np.broadcast_to(fits, c.shape))
        for by in keys:
            if len(on) <= 1:
                break
            values = by[on]
            on = on[values == values.min()]
        if len(on):
            out[d] = on[0]
    picks = sorted(set(out[out >= 0].tolist()))
    scores = score if score is not None else _score(config, c, ranked_key[-1])
    picks.sort(key=lambda i: (scores[i], c.dram[i], c.compute[i], i))
    return out, np.array(picks, dtype=np.int64)


def _bus(config: ArrayConfig) -> tuple[int, Fraction | None]:
    """``(axi_data_bytes, dram_rate)`` of ``config``, kept per design."""
    bus = _BUS.get(config)
    if bus is None:
        if len(_BUS) >= 4 * _CACHE_SIZE:
            _BUS.clear()
        bus = _BUS[config] = (axi_data_bytes(config), dram_rate(config))
    return bus


_BUS: dict[ArrayConfig, tuple[int, Fraction | None]] = {}


def _candidates(g: _Geometry, out_b: int) -> _Candidates:
    """:class:`_Candidates` of ``g``'s conv (``out_b`` bytes an output lane), every candidate at once: the
    stacked build of many arrays (``conv_candidates.stacked_candidates``) of this one alone, so one and
    many are one piece of code."""
    return stacked_candidates([g], [out_b])[0]


def conv_estimate(config: ArrayConfig, conv: Conv2d, tiling: ConvTiling) -> int:
    """Cycles of one image on chip, estimated (for the choice of :func:`conv_path`, not a result):
    the runs' ``run_cycles`` and the tiling's DRAM bytes at the design's rate, overlapped when
    double buffered, in series when not."""
    return _estimate(_Geometry(config, conv), tiling)


def _compute(g: _Geometry, t: ConvTiling) -> int:
    """The run cycles of tiling ``t``, summed over the distinct run shapes."""
    _, pixels, _ = _sizes(g, t)
    shapes = _run_shapes(g, t)
    return sum(cp * count * g.run(p, k, n) for p, cp in Counter(pixels).items() for (k, n), count in shapes.items())


def _estimate(g: _Geometry, t: ConvTiling) -> int:
    """:func:`conv_estimate`: :func:`_compute` and the DRAM bytes at the design's rate."""
    compute = _compute(g, t)
    dma = t.dram_bytes / g.bytes_per_cycle
    return int(max(compute, dma) if g.config.double_buffered else compute + dma)


def prefill(items: Sequence[tuple[ArrayConfig, Conv2d, bool]]) -> None:
    """Build and keep (``conv_search._CANDIDATES``) the candidates of every ``(config, conv,
    requant)`` not kept yet (tap packing allowed, as ``conv_tilings`` asks), those of one conv
    shape stacked (:func:`stacked_candidates`)."""
    pending: dict[tuple[object, ...], tuple[ArrayConfig, Conv2d, int]] = {}
    for config, conv, requant in items:
        key, out_b = candidates_key(config, conv, requant, True)
        if key not in _CANDIDATES and key not in pending:
            pending[key] = (config, conv, out_b)
    shapes: dict[object, list[tuple[object, ...]]] = {}
    for key in pending:
        shapes.setdefault(key[6], []).append(key)  # (key[6]: the conv's shape)
    if len(_CANDIDATES) + len(pending) >= _CACHE_SIZE:
        _CANDIDATES.clear()
    for keys in shapes.values():
        geometries = [_Geometry(pending[k][0], pending[k][1]) for k in keys]
        _CANDIDATES.update(zip(keys, stacked_candidates(geometries, [pending[k][2] for k in keys]), strict=True))
