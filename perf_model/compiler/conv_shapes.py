"""Tables of a conv's shape that the tiling search and the run schedule of every design share (internal).

A sweep scores the same few conv shapes (``shape_key``: a network's convs that differ in their
name or requantisation values only) on thousands of designs. What depends on the shape alone, or
on the shape and the array, is made once and kept here, read-only:

* :func:`shape_key`: a conv as the key of what its program's timing sees;
* :func:`level_row_tiles` and :func:`run_grid`: the search's output-row tiles per size and its
  candidates' run cycles (``conv_search._candidates``);
* :func:`row_tiles` and :func:`tap_tiles`: a tiling's output-row tiles with their bands and its tap
  tiles (``conv_schedule.RunArrays``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from perf_model import timing
from perf_model.compiler.conv_geometry import _Geometry
from workloads.ops import Conv2d

__all__ = ["shape_key", "level_row_tiles", "run_grid", "row_tiles", "tap_tiles"]

_SHAPES_SIZE = 1 << 13
_GRIDS_SIZE = 1 << 11  # run grids of up to ~100 KB


def shape_key(conv: Conv2d) -> Conv2d:
    """``conv`` as a key of what its program's timing sees: its shape, not its name or its
    requantisation's values (whether it requantises is passed apart), so the convs of a network
    that differ in these alone (ResNet-18's 20 convs are 11 shapes) are scored once."""
    key = _SHAPES.get(conv)
    if key is None:
        if len(_SHAPES) >= _SHAPES_SIZE:
            _SHAPES.clear()
        key = _SHAPES[conv] = dataclasses.replace(conv, name="", requant=None) if conv.name or conv.requant else conv
    return key


_SHAPES: dict[Conv2d, Conv2d] = {}


def level_row_tiles(g: _Geometry, rl: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Output-row tiles per size of ``rl`` (``g.row_levels()``; every size's tiles as one array,
    ``seg`` the size): most band rows, tiles, band rows summed, the distinct tile pixel counts and
    the tiles of each size per pixel count. Sizes above an image's rows are whole images
    (``_Geometry.m_tiles``): a tile of ``k`` images, the last one the rest. They depend on the conv's
    shape alone: kept per :func:`shape_key` (the caller must not write into them)."""
    key = shape_key(g.conv)
    held = _ROW_TILES.get(key)
    if held is not None:
        return held
    conv = g.conv
    n_img = g.images
    r_all = np.array(rl, dtype=np.int64)
    in_image = r_all <= g.out_h
    rs = r_all[in_image]
    per = -(-g.out_h // rs)
    seg = np.repeat(np.arange(len(rs)), per)
    oy = (np.arange(len(seg)) - np.repeat(np.cumsum(per) - per, per)) * rs[seg]
    oy1 = np.minimum(oy + rs[seg], g.out_h)
    top = oy * conv.stride_h - conv.pad_h
    bottom = (oy1 - 1) * conv.stride_h - conv.pad_h + (conv.kh - 1) * conv.dilation_h + 1
    rows = np.maximum(np.minimum(conv.h, bottom) - np.maximum(0, top), 0)
    starts = np.cumsum(per) - per
    band_rows, mt, band_sum = (np.zeros(len(rl), dtype=np.int64) for _ in range(3))
    band_rows[in_image] = np.maximum.reduceat(rows, starts)
    mt[in_image] = per * n_img
    band_sum[in_image] = np.add.reduceat(rows, starts) * n_img
    tile_level = np.flatnonzero(in_image)[seg]
    tile_pix = (oy1 - oy) * g.out_w
    tile_count = np.full(len(seg), n_img, dtype=np.int64)
    images = np.flatnonzero(~in_image)
    for i in images.tolist():
        k = rl[i] // g.out_h
        counts = np.minimum(np.arange(0, n_img, k) + k, n_img) - np.arange(0, n_img, k)
        band_rows[i], mt[i], band_sum[i] = counts.max() * conv.h, len(counts), n_img * conv.h
        tile_level = np.append(tile_level, np.full(len(counts), i))
        tile_pix = np.append(tile_pix, counts * g.out_h * g.out_w)
        tile_count = np.append(tile_count, np.ones(len(counts), dtype=np.int64))
    pix, at_pix = np.unique(tile_pix, return_inverse=True)
    per_pix = np.zeros((len(rl), len(pix)), dtype=np.int64)
    np.add.at(per_pix, (tile_level, at_pix.reshape(-1)), tile_count)
    if len(_ROW_TILES) >= _GRIDS_SIZE:
        _ROW_TILES.clear()
    held = _ROW_TILES[key] = (band_rows, mt, band_sum, pix, per_pix)
    return held


def run_grid(g: _Geometry, cl: list[int], nl: list[int], tl: list[int], fseg: np.ndarray, span: np.ndarray,
              filt: np.ndarray, pix: np.ndarray, per_pix: np.ndarray) -> np.ndarray:
    """The run cycles of every candidate, ``(c, r, n, t, 1)`` over the channel block, output-row,
    filter and tap tile sizes ``cl``, ``rl``, ``nl``, ``tl`` (``fseg``, ``span``, ``filt``: per filter
    tile of every size its size index, channel words and filters; ``pix``/``per_pix``: :func:`level_row_tiles`).
    They depend on the array, the shadow registers, the conv's shape and the taps a word (all the
    arguments derive from these): kept per those, so designs that differ in their bus, bits or
    buffering share them (the caller must not write into them)."""
    R, C, conv = g.R, g.C, g.conv
    key = (R, C, bool(g.config.shadow_stationary), shape_key(conv), g.T)
    held = _RUN_GRIDS.get(key)
    if held is not None:
        return held
    # (filter tile size index, span, filters, tiles of that span and filters)
    # as one int64 key per tile (mixed radix: sorted as the rows are), counted
    s_top, f_top = int(span.max()) + 1, int(filt.max()) + 1
    codes, kind_count = np.unique((fseg * s_top + span) * f_top + filt, return_counts=True)
    kinds = list(zip((codes // (s_top * f_top)).tolist(), (codes // f_top % s_top).tolist(),
                     (codes % f_top).tolist(), kind_count.tolist(), strict=True))
    # Run cycles per (filter, channel block, tap tile) size and pixel count (``_run_shapes``).
    taps_of = [Counter((ky1 - ky0) * (kx1 - kx0) for ky0, ky1, kx0, kx1 in g.tap_tiles(t)) for t in tl]
    tq, tp, tc = (np.array(v, dtype=np.int64) for v in zip(*((q, p, c) for q, taps in enumerate(taps_of)
                                                             for p, c in taps.items()), strict=True))
    kj, span, filt, count = (np.array(v, dtype=np.int64)[:, None, None] for v in zip(*kinds, strict=True))
    c_ts = np.array(cl, dtype=np.int64)[None, :, None]
    full, rest = span // c_ts, span % c_ts
    cell = (kj * len(cl) + np.arange(len(cl))[None, :, None]) * len(tl) + tq[None, None, :]
    shape3 = np.broadcast_shapes(cell.shape, full.shape, filt.shape)
    # every run of a (filter tile kind, channel block, tap tile) size: ``full`` blocks of ``c_t``
    # channel words and one of the ``rest``, each of the tap tile's ``tp`` taps (``_run_shapes``)
    at = np.concatenate([np.broadcast_to(cell, shape3).reshape(-1)] * 2)
    ks = np.concatenate([np.broadcast_to(tp * c_ts * R, shape3).reshape(-1),
                         np.broadcast_to(tp * rest * R, shape3).reshape(-1)])
    ns = np.concatenate([np.broadcast_to(filt, shape3).reshape(-1)] * 2)
    weight = np.concatenate([np.broadcast_to(count * tc * full, shape3).reshape(-1),
                             np.broadcast_to(count * tc * (rest > 0), shape3).reshape(-1)])
    keep = weight > 0
    at, ks, ns, weight = at[keep], ks[keep], ns[keep], weight[keep]
    shadow = g.config.shadow_stationary
    cyc = timing.run_cycles(0, R, C, pix[None, :], ks[:, None], ns[:, None], shadow).astype(np.int64)
    per_cell = np.zeros((len(nl) * len(cl) * len(tl), len(pix)), dtype=np.int64)
    np.add.at(per_cell, at, cyc * weight[:, None])
    compute = per_cell.reshape(len(nl), len(cl), len(tl), len(pix)) @ per_pix.T  # (n, c, t, r)
    compute = compute.transpose(1, 3, 0, 2)[..., None]  # (c, r, n, t, 1)
    if len(_RUN_GRIDS) >= _GRIDS_SIZE:
        _RUN_GRIDS.clear()
    _RUN_GRIDS[key] = compute
    return compute


_ROW_TILES: dict[Conv2d, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
_RUN_GRIDS: dict[tuple[object, ...], np.ndarray] = {}


_SHARED_SIZE = 1 << 14
_ROWS: dict[tuple[object, ...], tuple[list[tuple[int, int]], np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                      np.ndarray, np.ndarray]] = {}
_TAPS: dict[tuple[object, ...], tuple[list[tuple[int, int, int, int]], np.ndarray, np.ndarray]] = {}


def _frozen(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.flags.writeable = False


def row_tiles(g: _Geometry, rows_t: int) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray, np.ndarray,
                                                   np.ndarray, np.ndarray, np.ndarray]:
    """Per output-row tile of ``rows_t`` rows: its rows ``(oy0, oy1)`` (``_Geometry.m_tiles``), pixels,
    first pixel, and its band's first input row, rows, pad_top and the window's ``image_rows``.
    They depend on the conv's shape alone: kept per shape and ``rows_t``, shared read-only."""
    key = (shape_key(g.conv), rows_t)
    held = _ROWS.get(key)
    if held is None:
        oys = g.m_tiles(rows_t)
        bands = [g.band(oy0, oy1) for oy0, oy1 in oys]
        r0, rows, pad = (np.array([b[i] for b in bands], dtype=np.int64) for i in range(3))
        held = (oys, np.array([(oy1 - oy0) * g.out_w for oy0, oy1 in oys], dtype=np.int64),
                np.array([oy0 * g.out_w for oy0, _ in oys], dtype=np.int64), r0, rows, pad,
                np.array([g.image_rows(oy0, oy1) for oy0, oy1 in oys], dtype=np.int64))
        _frozen(*held[1:])
        if len(_ROWS) >= _SHARED_SIZE:
            _ROWS.clear()
        _ROWS[key] = held
    return held


def tap_tiles(g: _Geometry, taps_t: int) -> tuple[list[tuple[int, int, int, int]], np.ndarray, np.ndarray]:
    """The tap tiles of ``taps_t`` taps (``_Geometry.tap_tiles``), their taps and their window key,
    kept per conv shape, taps a word and ``taps_t`` (shared read-only)."""
    key = (shape_key(g.conv), g.T, taps_t)
    held = _TAPS.get(key)
    if held is None:
        taps = g.tap_tiles(taps_t)
        tap_n = np.array([(ky1 - ky0) * (kx1 - kx0) for ky0, ky1, kx0, kx1 in taps], dtype=np.int64)
        tap_key = np.array([(ky0 * 4096 + kx0) * 4096 + kx1 for ky0, _, kx0, kx1 in taps], dtype=np.int64)
        _frozen(tap_n, tap_key)
        if len(_TAPS) >= _SHARED_SIZE:
            _TAPS.clear()
        held = _TAPS[key] = (taps, tap_n, tap_key)
    return held
