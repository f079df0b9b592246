"""A conv's candidate tilings on arrays: what the tiling search (``conv_search``) ranks.

``_Candidates``: every candidate tiling of a conv on an array (run cycles, DRAM bytes and the words
each candidate needs, over the axes channel block x output-row tile x filter tile x tap tile x loop
order). :func:`stacked_candidates` builds those of many arrays for one conv shape at once (a sweep's
first pass builds them for each (array, bus, bits, buffering) and conv: thousands of builds of some
fifty small numpy calls each): the filter tiles' row bytes of all keys in one call, the five-axis
DRAM bytes of all keys as one array with a leading key axis (each key's axes padded to the longest,
the padding never read), then each key's arrays sliced out; what depends on the array's rows and
columns and the conv's shape alone comes from :func:`_tile_levels` and :func:`_tap_tiles`, kept per
those. ``conv_search._candidates`` is this of one array alone, and ``conv_search.prefill`` of the
arrays of a call; each key's ``_Candidates`` of many equal those of the array alone
(``tests/perf_model/test_model_conv_batch.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from perf_model.compiler.conv_geometry import _Geometry, _levels, _tap_levels, row_bytes_of, weight_tiles_held
from perf_model.compiler.conv_shapes import level_row_tiles, run_grid, shape_key

__all__ = ["stacked_candidates"]

#: Entries kept in each cache of a conv's candidates (here and ``conv_search``'s): candidates of ~40 KB
#: (a ResNet-18 conv on a 16x16 array).
_CACHE_SIZE = 1 << 11


def stacked_candidates(gs: Sequence[_Geometry], out_bs: Sequence[int]) -> list[_Candidates]:
    """``conv_search._candidates(g, out_b)`` of each geometry of one conv shape (module docstring)."""
    conv, K = gs[0].conv, len(gs)
    by_array: dict[tuple[int, int], _Levels] = {}  # (each looked up once per array of the batch)
    lvs = [by_array.get((g.R, g.C)) or by_array.setdefault((g.R, g.C), _tile_levels(g)) for g in gs]
    taps = [_tap_tiles(g) for g in gs]
    nc, nn, nt = ([len(x) for x in col] for col in ([lv.cl for lv in lvs], [lv.nl for lv in lvs], [t[0] for t in taps]))
    Cm, Nm, Tm, Rl = max(nc), max(nn), max(nt), len(lvs[0].rl)

    def col(values: list[int]) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    # Filter tiles of every key, one array: their row bytes (a weight's, an output's) in one call.
    fk = np.repeat(np.arange(K), [len(lv.span) for lv in lvs])
    span, filt = np.concatenate([lv.span for lv in lvs]), np.concatenate([lv.filt for lv in lvs])
    C, W = col([g.C for g in gs])[fk], col([g.W for g in gs])[fk]
    elem = np.stack([col([g.config.input_bits // 8 for g in gs])[fk], col(list(out_bs))[fk]])
    rows = row_bytes_of(filt, C, elem, W)
    weights = (col([g.taps for g in gs]) * col([g.kl for g in gs]))[fk] * span * rows[0]
    starts = np.cumsum([0] + [len(lv.span) for lv in lvs])
    # Per key, padded: one/two-block weights (c, n), weights and outputs summed per filter tile size
    # (n), weight tiles (c, n), band loads (c, r, n, 1, 2), tap tiles (t).
    blocks2 = np.zeros((K, 2, Cm, Nm), dtype=np.int64)
    sums = np.zeros((K, 2, Nm), dtype=np.int64)
    blocks = np.zeros((K, Cm, Nm), dtype=np.int64)
    loads = np.zeros((K, Cm, Rl, Nm, 1, 2), dtype=np.int64)
    tt = np.ones((K, Tm), dtype=np.int64)
    for k, lv in enumerate(lvs):
        a, b, c, n = starts[k], starts[k + 1], nc[k], nn[k]
        blocks2[k, :, :c, :n] = np.add.reduceat(weights[a:b] * lv.nb12, lv.fstarts, axis=-1)
        sums[k, :, :n] = np.add.reduceat(np.stack([weights[a:b], rows[1, a:b]]), lv.fstarts, axis=-1)
        blocks[k, :c, :n] = lv.blocks
        loads[k, :c, :, :n] = lv.loads
        tt[k, :nt[k]] = taps[k][1].reshape(-1)
    # The DRAM bytes of every key's candidates (``conv_search._candidates``), a leading key axis.
    at = (slice(None), None, None, None, None, None)
    extra, awb = col([g.extra for g in gs])[at], col([g.a_word_bytes for g in gs])[at]
    held = col([weight_tiles_held(g.config) for g in gs])[at]
    mt5, bs5 = lvs[0].mt5[None], lvs[0].bs5[None]
    tt6 = tt[:, None, None, None, :, None]
    a_bytes = (bs5 * conv.w + mt5 * extra) * awb * loads
    one, two = blocks2[:, 0, :, None, :, None, None], blocks2[:, 1, :, None, :, None, None]
    once = one * (tt6 <= held) + two * (tt6 == 1) * (held == 2)
    w5 = sums[:, 0, None, None, :, None, None]
    b_mn = np.where(blocks[:, :, None, :, None, None] * tt6 <= held, w5, mt5 * w5)
    b_nm = once + mt5 * (w5 - once)
    dram = a_bytes + np.where(_ORDER[None] == 0, b_mn, b_nm) + gs[0].M * sums[:, 1, None, None, :, None, None]
    out = []
    grids: dict[tuple[int, int, bool, int], np.ndarray] = {}
    for k, (g, lv, (tl, _, tl_a)) in enumerate(zip(gs, lvs, taps, strict=True)):
        at_grid = (g.R, g.C, bool(g.config.shadow_stationary), g.T)
        compute = grids.get(at_grid)
        if compute is None:
            compute = grids[at_grid] = run_grid(g, lv.cl, lv.nl, tl, lv.fseg, lv.span, lv.filt, lv.pix, lv.per_pix)
        d = dram[k, :nc[k], :, :nn[k], :nt[k]]
        shape = np.broadcast_shapes(compute.shape, d.shape)
        out.append(_Candidates(
            shape=shape, compute=np.broadcast_to(compute, shape).reshape(-1),
            dram=np.broadcast_to(d, shape).reshape(-1), band=lv.band + g.extra,
            weight=tl_a[None, None, :] * lv.weight, ofmap=lv.ofmap,
            levels=(lv.cl, lv.rl, lv.nl, tl), smallest_band=lv.smallest + g.extra))
    return out


@dataclasses.dataclass(frozen=True)
class _Candidates:
    """Every candidate tiling of a conv on an array, over axes (channel block ``c_t``, output-row
    tile ``rows_t``, filter tile ``n_t``, tap tile ``taps_t``, loop order ``mn``/``nm``) in the
    search's loop order: ``compute`` (:func:`_estimate`'s run cycles) and ``dram``
    (:func:`_dram_bytes`) flat; the ifmap words a candidate needs per ``(c, r)``, the weight words
    per ``(c, n, t)``, the ofmap words per ``(r, n)``; the levels of the four sizes; the ifmap words
    of the smallest band."""

    shape: tuple[int, ...]
    compute: np.ndarray
    dram: np.ndarray
    band: np.ndarray
    weight: np.ndarray
    ofmap: np.ndarray
    levels: tuple[list[int], list[int], list[int], list[int]]
    smallest_band: int


#: The loop order axis of the candidates (``mn``, ``nm``).
_ORDER = np.array([0, 1])[None, None, None, None, :]


class _Levels(NamedTuple):
    """What :func:`_candidates` derives from the array's rows and columns and the conv's shape alone
    (:func:`_tile_levels`): the channel block, output-row and filter tile levels ``cl``, ``rl``,
    ``nl``; every filter tile of every size (``fseg`` its size, ``fstarts`` each size's first) with
    its channel words ``span`` and filters ``filt``; per channel block size and filter tile whether
    it is one block and two (``nb12``); per (channel block, filter tile) size the weight tiles
    ``blocks``; the output-row tiles' pixel counts (``pix``/``per_pix``, ``level_row_tiles``), their
    count ``mt5`` and band rows ``bs5`` over the candidates' axes; the band loads of an output-row
    tile per candidate ``loads``; the words a candidate's band (without the extra pixels of packed
    taps), weight tile (per tap) and output tile need, ``band``, ``weight``, ``ofmap``, and the
    smallest band's ``smallest``."""

    cl: list[int]
    rl: list[int]
    nl: list[int]
    fseg: np.ndarray
    fstarts: np.ndarray
    span: np.ndarray
    filt: np.ndarray
    nb12: np.ndarray
    blocks: np.ndarray
    pix: np.ndarray
    per_pix: np.ndarray
    mt5: np.ndarray
    bs5: np.ndarray
    loads: np.ndarray
    band: np.ndarray
    weight: np.ndarray
    ofmap: np.ndarray
    smallest: int


def _tile_levels(g: _Geometry) -> _Levels:
    """:class:`_Levels` of ``g``, kept per the array's rows and columns and the conv's shape (shared read-only)."""
    key = (g.R, g.C, shape_key(g.conv))
    held = _LEVELS.get(key)
    if held is not None:
        return held
    R, C, N, conv = g.R, g.C, g.N, g.conv

    def words_of(n0: np.ndarray, n1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``_Geometry.filter_words`` over arrays: the channel words of filters ``n0 .. n1 - 1``."""
        return (n0 // g.cpo) * g.cpg // R, -(-(((n1 - 1) // g.cpo + 1) * g.cpg) // R)

    group0 = np.arange(0, N, g.cpo, dtype=np.int64)
    w0, w1 = words_of(group0, np.minimum(group0 + g.cpo, N))
    whole = words_of(np.zeros(1, dtype=np.int64), np.full(1, N, dtype=np.int64))
    most = int(max((w1 - w0).max(), (whole[1] - whole[0])[0]))
    cl, nl = _levels(most), _levels(N, min(C, N))
    rl = g.row_levels()
    band_rows, mt, band_sum, pix, per_pix = level_row_tiles(g, rl)
    # Filter tiles per size (``_sizes``; every size's tiles as one array, ``fseg`` the size): channel
    # words, first block kept from the tile before, columns.
    n_ts = np.array(nl, dtype=np.int64)
    fper = -(-N // n_ts)
    fseg = np.repeat(np.arange(len(nl)), fper)
    fstarts = np.cumsum(fper) - fper
    n0 = (np.arange(len(fseg)) - np.repeat(fstarts, fper)) * n_ts[fseg]
    n1 = np.minimum(n0 + n_ts[fseg], N)
    w0, w1 = words_of(n0, n1)
    span, filt = w1 - w0, n1 - n0
    c_col = np.array(cl, dtype=np.int64)[:, None]
    first = np.minimum(w0 + c_col, w1)
    last = w0 + (-(-span // c_col) - 1) * c_col
    kept = np.zeros(first.shape, dtype=bool)  # not the first tile of its size, and its first block the last one's
    kept[:, 1:] = (w0[1:] == last[:, :-1]) & (first[:, 1:] == w1[:-1])
    kept[:, fstarts] = False
    nb = -(-span // c_col)  # channel blocks (runs a tap tile) of each filter tile
    words = np.broadcast_to(np.add.reduceat(span, fstarts), (len(cl), len(nl)))
    shared = np.add.reduceat((first - w0) * kept, fstarts, axis=1)
    mt5, bs5 = mt[None, :, None, None, None], band_sum[None, :, None, None, None]
    keep = (_ORDER == 0) | (mt5 == 1)
    cols_n = -(-np.array(nl) // C)
    c2 = np.array(cl)[:, None]
    held = _LEVELS[key] = _Levels(
        cl, rl, nl, fseg, fstarts, span, filt, np.stack([nb == 1, nb == 2]), np.add.reduceat(nb, fstarts, axis=1),
        pix, per_pix, mt5, bs5,
        words[:, None, :, None, None] - shared[:, None, :, None, None] * keep,  # band loads an output-row tile
        band_rows[None, :] * conv.w * c2, R * c2[:, :, None] * cols_n[None, :, None],
        np.array(rl)[:, None] * g.out_w * cols_n[None, :], int(band_rows[0]) * conv.w)
    for x in held[3:-1]:
        x.flags.writeable = False
    if len(_LEVELS) > _CACHE_SIZE:
        _LEVELS.clear()
    return held


_LEVELS: dict[tuple[object, ...], _Levels] = {}


def _tap_tiles(g: _Geometry) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The tap tile levels of ``g``'s kernel (``_tap_levels``), their tap tiles' counts over the
    candidates' axes and the levels as an array, kept per kernel rows and taps (or tap groups) a row."""
    key = (g.conv.kh, g.kw)
    held = _TAPS.get(key)
    if held is None:
        tl = _tap_levels(*key)
        held = _TAPS[key] = (tl, np.array([len(g.tap_tiles(t)) for t in tl])[None, None, None, :, None], np.array(tl))
    return held


_TAPS: dict[tuple[int, int], tuple[list[int], np.ndarray, np.ndarray]] = {}
