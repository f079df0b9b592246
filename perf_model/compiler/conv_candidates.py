"""The tiling search's candidates of one conv on many arrays at once (a sweep's first pass).

``conv_search`` ranks every candidate tiling of a conv on an array (``_Candidates``: run cycles,
DRAM bytes and the words each candidate needs, over the axes channel block x output-row tile x
filter tile x tap tile x loop order), kept per the design fields they see. A sweep's first pass
builds them once for each (array, bus, bits, buffering) and conv: thousands of builds of some
fifty small numpy calls each. :func:`prefill` builds those of many arrays for one conv shape
stacked: the filter tiles' row bytes of all keys in one call, the five-axis DRAM bytes of all
keys as one array with a leading key axis (each key's axes padded to the longest, the padding
never read), then each key's arrays sliced out; what depends on the array's rows and columns and
the conv's shape alone comes from ``conv_search._tile_levels``. :func:`conv_search._candidates`
is this of one array alone; each key's ``_Candidates`` of many equal it
(``tests/perf_model/test_model_conv_batch.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from accel_spec.config import ArrayConfig
from perf_model.compiler.conv_geometry import _Geometry, row_bytes_of, weight_tiles_held
from perf_model.compiler.conv_search import (
    _CACHE_SIZE,
    _CANDIDATES,
    _ORDER,
    _Candidates,
    _Levels,
    _tap_tiles,
    _tile_levels,
    candidates_key,
)
from perf_model.compiler.conv_shapes import run_grid
from workloads.ops import Conv2d

__all__ = ["prefill", "stacked_candidates"]


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
