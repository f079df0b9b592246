"""The compiler of a convolution run on chip: NHWC bands in the ifmap, windows built by the RTL.

``compile_conv`` turns one image of a :class:`~workloads.ops.Conv2d` into a program for a
weight-stationary design (the address generator, ``rtl_gen.core.conv_addr``, serves the WS
controller's x stream). Nothing is im2col'd by the host: the input crosses the DRAM interface
once per output tile's band (plus the halo rows two bands share), the pads are made on chip.

The op as the array sees it: a GEMM of ``M = out_h * out_w`` output pixels (streamed), ``N =
c_out`` filters (columns) and ``K = taps * words * R`` (rows: ``taps = kh * kw``, each tap's
input channels padded to whole ifmap words of ``R`` lanes). Its runs are the compiler's tiles
``(m0, m1, k0, k1, n0, n1, accumulate)`` of that GEMM, so ``perf_model.timing.run_cycles`` times
them unchanged:

* ``m`` in whole output rows (``rows_t`` rows a tile), whose input band is the rows
  ``oy0 * stride_h - pad_top .. (oy1 - 1) * stride_h - pad_top + (kh - 1) * dilation_h``
  clipped to the image (all columns);
* ``n`` in tiles of ``n_t`` filters (whole array columns);
* ``k`` in channel blocks of ``c_t`` words, each in tap tiles of ``taps_t`` taps (whole kernel
  rows, or part of one row when a row's taps do not fit the weight buffer), channel blocks
  outer: a run's ``K`` is ``taps_t * words * R``, its window the band's with the pads shifted by
  its first tap. A filter tile of a grouped convolution reads only the channel words its
  groups span (depthwise: one word per ``R`` filters); the weights of the other lanes are zero.
  The band of a channel block stays in the ifmap while its tap tiles run.

DRAM layout (every tensor on a 4 KiB page after the program):

    a  the image, NHWC: ``h * w`` rows (pixels) of ``ceil(c_in / R) * R`` channels (zero padded)
    b  the weights as the runs read them: for filter ``j`` (column), its tile's K rows in run
       order (channel block, tap tile, tap ``(ky, kx)``, channel word, lane), zeros elsewhere
    c  the output, NHWC: ``out_h * out_w`` rows of ``ceil(c_out / C) * C`` channels (as a GEMM's C)
    q  the output stage's parameters (requantised ops), as for a GEMM

A band is one ``LOAD``: ``band_rows`` DRAM rows of ``w * words`` words (all channel words of a
pixel) or, for a channel block, ``band_rows * w`` rows (pixels) of ``c_t`` words; in the ifmap
it sits in NHWC order, ``c_t`` words a pixel. Each run is a ``WINDOW`` (only when it differs from
the last one) and a ``RUN`` with ``window``. The schedule (single or double buffered, the stores
in parts) is the GEMM compiler's (``perf_model.compiler.program``).

The tiling is searched here (all tilings that fit, in whole output rows, filter tiles of whole
array columns and channel blocks, both loop orders with K innermost): the fewest DRAM bytes,
then the fewest runs. A band of one output row that does not fit the ifmap is infeasible, with
a reason naming the op and the words it needs.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterator

import numpy as np

from accel_dse.commands import COMMAND_BYTES, QUEUE_DEPTH, Buffer, Command, Opcode, queue_entry_commands
from accel_dse.config import ArrayConfig, Dataflow
from accel_dse.errors import ModelError
from perf_model import timing
from perf_model.compiler.conv_window import ConvWindow
from perf_model.compiler.program import (
    PAGE,
    QPARAM_CHANNELS,
    GemmProgram,
    TensorLayout,
    _align,
    _buffer_depths,
    _Builder,
    _double,
    _single,
)
from perf_model.program_timing import axi_data_bytes, dram_rate
from workloads.ops import Conv2d

__all__ = ["ConvTiling", "ConvProgram", "compile_conv", "conv_tiling", "conv_weight_matrix", "conv_served",
           "conv_path", "conv_estimate"]

Tile = tuple[int, int, int, int, int, int, bool]
Part = tuple[int, int, int, int, int, int]


def conv_served(config: ArrayConfig) -> str:
    """``""`` when ``config`` builds conv windows on chip, else the reason it does not."""
    if config.dataflow is not Dataflow.WS:
        return (f"conv windows are built on chip by weight-stationary designs only; a "
                f"{config.dataflow.value.upper()} design runs a conv as the host's im2col GEMM")
    return ""


@dataclasses.dataclass(frozen=True)
class ConvTiling:
    """A conv tiling: output rows, filters, channel words and taps per tile, and the loop order.

    ``order``: ``"mn"`` (output rows outer, filters inner) or ``"nm"``; channel blocks innermost.
    ``status``/``reason`` as a ``TilePlan``'s.
    """

    status: str
    reason: str
    rows_t: int = 0
    n_t: int = 0
    c_t: int = 0
    taps_t: int = 0
    order: str = "mn"
    dram_bytes: int = 0

    @property
    def feasible(self) -> bool:
        return self.status == "ok"


class _Geometry:
    """The derived sizes of one conv on one design."""

    def __init__(self, config: ArrayConfig, conv: Conv2d) -> None:
        self.config, self.conv = config, conv
        self.R, self.C = config.rows, config.cols
        self.words = math.ceil(conv.c_in / self.R)  # ifmap words per pixel in DRAM
        self.taps = conv.kh * conv.kw
        self.cpg, self.cpo = conv.c_in // conv.groups, conv.c_out // conv.groups
        self.out_h, self.out_w = conv.out_h, conv.out_w
        self.images = conv.n
        # Tiles of whole images (several images a run) when each image's band is its whole input,
        # ``out_h * stride_h`` rows (``image_rows`` of the window: the images' bands back to back).
        self.stack = (conv.n > 1 and self.band_one(0, self.out_h) == (0, conv.h, conv.pad_h)
                      and self.out_h * conv.stride_h == conv.h)
        self.M, self.N = conv.n * self.out_h * self.out_w, conv.c_out
        rate = dram_rate(config)
        self.bytes_per_cycle = float(rate if rate is not None else axi_data_bytes(config))
        self._runs: dict[tuple[int, int, int], int] = {}
        self.sizes: dict[tuple[int, int, int], tuple[list[int], list[int], list[tuple[int, int, int, int]]]] = {}
        self.shapes: dict[tuple[int, int, int], Counter[tuple[int, int]]] = {}
        self.filter_tiles: dict[int, Counter[tuple[int, int]]] = {}

    def run(self, m: int, k: int, n: int) -> int:
        """``timing.run_cycles`` of one run of ``m x k x n`` (kept per shape)."""
        cyc = self._runs.get((m, k, n))
        if cyc is None:
            cyc = self._runs[(m, k, n)] = int(timing.run_cycles(0, self.R, self.C, m, k, n,
                                                                 self.config.shadow_stationary))
        return cyc

    def row_levels(self) -> list[int]:
        """Output rows per output-row tile: powers of two of an image's rows and all of them, then
        (images stacked) powers of two of whole images and all images."""
        levels = _levels(self.out_h)
        if self.stack:
            levels += [k * self.out_h for k in _levels(self.images)[1:]]
        return levels

    def m_tiles(self, rows_t: int) -> list[tuple[int, int]]:
        """Output rows ``(oy0, oy1)`` of the batch (image ``b``'s rows ``b * out_h ..``) of each
        output-row tile of ``rows_t`` rows: within an image, or (more than an image's rows) whole images."""
        oh, n = self.out_h, self.images
        if rows_t > oh:
            k = rows_t // oh
            return [(b * oh, min(b + k, n) * oh) for b in range(0, n, k)]
        return [(b * oh + oy, b * oh + min(oy + rows_t, oh)) for b in range(n) for oy in range(0, oh, rows_t)]

    def band(self, oy0: int, oy1: int) -> tuple[int, int, int]:
        """``(first input row, rows, pad_top)`` of the band of output rows ``oy0 .. oy1 - 1`` of the
        batch (the first row counted over the batch's images; whole images: all their rows)."""
        b, oy0 = divmod(oy0, self.out_h)
        if oy1 - b * self.out_h > self.out_h:  # whole images
            return b * self.conv.h, (oy1 - b * self.out_h) // self.out_h * self.conv.h, self.conv.pad_h
        r0, rows, pad = self.band_one(oy0, oy1 - b * self.out_h)
        return b * self.conv.h + r0, rows, pad

    def image_rows(self, oy0: int, oy1: int) -> int:
        """The window's ``image_rows`` of the tile of output rows ``oy0 .. oy1 - 1``: 0 within an image."""
        return self.out_h if oy1 - oy0 > self.out_h else 0

    def band_one(self, oy0: int, oy1: int) -> tuple[int, int, int]:
        """``(first input row, rows, pad_top)`` of the band of output rows ``oy0 .. oy1 - 1`` of one image."""
        cv = self.conv
        top = oy0 * cv.stride_h - cv.pad_h
        bottom = (oy1 - 1) * cv.stride_h - cv.pad_h + (cv.kh - 1) * cv.dilation_h + 1
        r0, r1 = max(0, top), min(cv.h, bottom)
        return r0, max(0, r1 - r0), r0 - top

    def band_rows(self, rows_t: int) -> int:
        """The most input rows a band of ``rows_t`` output rows holds."""
        return max(self.band(oy0, oy1)[1] for oy0, oy1 in self.m_tiles(rows_t))

    def filter_words(self, n0: int, n1: int) -> tuple[int, int]:
        """``(first, end)`` channel words the filters ``n0 .. n1 - 1`` read (their groups' channels)."""
        g0, g1 = n0 // self.cpo, (n1 - 1) // self.cpo
        return g0 * self.cpg // self.R, math.ceil((g1 + 1) * self.cpg / self.R)

    def tap_tiles(self, taps_t: int) -> list[tuple[int, int, int, int]]:
        """``(ky0, ky1, kx0, kx1)`` of each tap tile of ``taps_t`` taps: whole kernel rows when
        ``taps_t >= kw`` (``taps_t // kw`` rows a tile), else parts of one row."""
        kh, kw = self.conv.kh, self.conv.kw
        if taps_t >= kw:
            step = taps_t // kw
            return [(ky, min(ky + step, kh), 0, kw) for ky in range(0, kh, step)]
        return [(ky, ky + 1, kx, min(kx + taps_t, kw)) for ky in range(kh) for kx in range(0, kw, taps_t)]

    def tiles(self, t: ConvTiling) -> Iterator[tuple[Tile, Part]]:
        """The runs of tiling ``t`` and the part of the kernel each reads (channel words and tap
        tile: ``(c0, c1, ky0, ky1, kx0, kx1)``), in order (K innermost)."""
        m_tiles = [(oy0 * self.out_w, oy1 * self.out_w) for oy0, oy1 in self.m_tiles(t.rows_t)]
        n_tiles = [(n0, min(n0 + t.n_t, self.N)) for n0 in range(0, self.N, t.n_t)]
        pairs = ([(mt, nt) for mt in m_tiles for nt in n_tiles] if t.order == "mn"
                 else [(mt, nt) for nt in n_tiles for mt in m_tiles])
        taps = self.tap_tiles(t.taps_t)
        for (m0, m1), (n0, n1) in pairs:
            w0, w1 = self.filter_words(n0, n1)
            k = 0
            for c0 in range(w0, w1, t.c_t):
                c1 = min(c0 + t.c_t, w1)
                for ky0, ky1, kx0, kx1 in taps:
                    size = (ky1 - ky0) * (kx1 - kx0) * (c1 - c0) * self.R
                    yield (m0, m1, k, k + size, n0, n1, k > 0), (c0, c1, ky0, ky1, kx0, kx1)
                    k += size


def _room(config: ArrayConfig) -> tuple[int, int, int]:
    depths = _buffer_depths(config)
    return tuple(d // 2 if config.double_buffered else d for d in depths)  # type: ignore[return-value]


def _sizes(g: _Geometry, t: ConvTiling) -> tuple[list[int], list[int], list[tuple[int, int, int, int]]]:
    """Of tiling ``t``: band rows and output pixels per output-row tile, and per filter tile its
    channel words, the size of its first channel block, whether that block is the last block of
    the filter tile before (the band stays), and its columns (filters in whole array columns);
    kept per tile size."""
    key = (t.rows_t, t.n_t, t.c_t)
    if key not in g.sizes:
        rows = g.m_tiles(t.rows_t)
        bands = [g.band(oy0, oy1)[1] for oy0, oy1 in rows]
        pixels = [(oy1 - oy0) * g.out_w for oy0, oy1 in rows]
        filters, last = [], None
        for n0 in range(0, g.N, t.n_t):
            n1 = min(n0 + t.n_t, g.N)
            w0, w1 = g.filter_words(n0, n1)
            first = (w0, min(w0 + t.c_t, w1))
            filters.append((w1 - w0, first[1] - first[0], int(first == last), -(-(n1 - n0) // g.C) * g.C))
            last = (w0 + (-(-(w1 - w0) // t.c_t) - 1) * t.c_t, w1)
        g.sizes[key] = (bands, pixels, filters)
    return g.sizes[key]


def _run_shapes(g: _Geometry, t: ConvTiling) -> Counter[tuple[int, int]]:
    """``(K, filters)`` of the runs of one output-row tile, counted (kept per tile size): per filter
    tile of ``span`` channel words, ``span // c_t`` full channel blocks and one of the rest, each
    in every tap tile."""
    key = (t.n_t, t.c_t, t.taps_t)
    if key not in g.shapes:
        taps = Counter((ky1 - ky0) * (kx1 - kx0) for ky0, ky1, kx0, kx1 in g.tap_tiles(t.taps_t))
        shapes: Counter[tuple[int, int]] = Counter()
        for (span, filters), count in _filter_tiles(g, t.n_t).items():
            full, rest = divmod(span, t.c_t)
            for tp, tc in taps.items():
                if full:
                    shapes[(tp * t.c_t * g.R, filters)] += count * tc * full
                if rest:
                    shapes[(tp * rest * g.R, filters)] += count * tc
        g.shapes[key] = shapes
    return g.shapes[key]


def _filter_tiles(g: _Geometry, n_t: int) -> Counter[tuple[int, int]]:
    """``(channel words, filters)`` of the filter tiles of ``n_t`` filters, counted (kept per size)."""
    if n_t in g.filter_tiles:
        return g.filter_tiles[n_t]
    tiles: Counter[tuple[int, int]] = g.filter_tiles.setdefault(n_t, Counter())
    for n0 in range(0, g.N, n_t):
        n1 = min(n0 + n_t, g.N)
        w0, w1 = g.filter_words(n0, n1)
        tiles[(w1 - w0, n1 - n0)] += 1
    return tiles


def _dram_bytes(g: _Geometry, t: ConvTiling, requant: bool) -> int:
    """DRAM bytes of tiling ``t``: each band, weight tile and output tile as the schedule moves them,
    in closed form (equal to :func:`_walk_bytes`, run by run). A band stays for the next run when
    its output rows and channel words are the same (the next filter tile's first channel block is
    the last one's, output rows outer or a single row tile); a weight tile when the next run is the
    same tile (a filter tile of one run, filters outer or a single filter tile)."""
    cfg, R = g.config, g.R
    ib = cfg.input_bits // 8
    out = ib if requant else (4 if cfg.acc_bits <= 32 else 8)
    bands, _, filters = _sizes(g, t)
    mt, nt, tap_tiles = len(bands), len(filters), len(g.tap_tiles(t.taps_t))
    words = sum(span for span, *_ in filters)
    if t.order == "mn" or mt == 1:
        words -= sum(first * shared for _, first, shared, _ in filters)
    a = sum(bands) * g.conv.w * R * ib * words
    single = [-(-span // t.c_t) * tap_tiles == 1 for span, *_ in filters]  # a filter tile of one run
    weights = [g.taps * span * R * cols * ib for span, _, _, cols in filters]
    if t.order == "mn":
        b = weights[0] if nt == 1 and single[0] else mt * sum(weights)
    else:
        b = sum(w if one else mt * w for w, one in zip(weights, single, strict=True))
    return a + b + g.M * sum(cols for *_, cols in filters) * out


def _walk_bytes(g: _Geometry, t: ConvTiling, requant: bool) -> int:
    """DRAM bytes of tiling ``t``, run by run (any conv)."""
    R, C, cfg = g.R, g.C, g.config
    ib = cfg.input_bits // 8
    out = ib if requant else (4 if cfg.acc_bits <= 32 else 8)
    held_a = held_b = None
    total = 0
    for tile, part in g.tiles(t):
        m0, m1, k0, k1, n0, n1, _ = tile
        key_a = (m0, m1, part[:2])
        if key_a != held_a:
            held_a = key_a
            oy0, oy1 = m0 // g.out_w, -(-m1 // g.out_w)
            total += g.band(oy0, oy1)[1] * g.conv.w * (part[1] - part[0]) * R * ib
        key_b = (k0, k1, n0, n1)
        if key_b != held_b:
            held_b = key_b
            total += (k1 - k0) * math.ceil((n1 - n0) / C) * C * ib
        w0, w1 = g.filter_words(n0, n1)
        if k1 == (w1 - w0) * g.taps * R:  # the output tile's last run: stored
            total += (m1 - m0) * math.ceil((n1 - n0) / C) * C * out
    return total


def _levels(top: int, step: int = 1) -> list[int]:
    """Powers of two times ``step`` below ``top``, and ``top``."""
    out, v = [], step
    while v < top:
        out.append(v)
        v *= 2
    return [*out, top]


def _tap_levels(kh: int, kw: int) -> list[int]:
    """Taps per tap tile: whole kernel rows (powers of two of them, and all), parts of a row."""
    return sorted({*(r * kw for r in _levels(kh)), *_levels(kw)}, reverse=True)


def conv_tiling(config: ArrayConfig, conv: Conv2d, *, requant: bool = False) -> ConvTiling:
    """The tiling ``compile_conv`` uses (module docstring), or an infeasible one with its reason.

    The candidates' order by score (:func:`_estimate`, then :func:`_dram_bytes`, then loop order)
    does not depend on the buffer sizes, which only decide which candidates fit: it is kept per
    design fields the scores see and conv (:func:`_ranking`), and a design takes the first
    candidate that fits its buffers."""
    why = conv_served(config)
    if why:
        return ConvTiling("infeasible", why)
    room = _room(config)
    best, c = _ranking(config, conv, requant)
    fits = ((c.band[:, :, None, None, None] <= room[0]) & (c.weight[:, None, :, :, None] <= room[1])
            & (c.ofmap[None, :, :, None, None] <= room[2]))
    fits = np.broadcast_to(fits, c.shape).reshape(-1)[best]
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


_RANKINGS: dict[tuple[object, ...], np.ndarray] = {}
_CANDIDATES: dict[tuple[object, ...], _Candidates] = {}
_CACHE_SIZE = 1 << 11  # candidates of ~40 KB (a ResNet-18 conv on a 16x16 array)


def _ranking(config: ArrayConfig, conv: Conv2d, requant: bool) -> tuple[np.ndarray, _Candidates]:
    """The candidates (:class:`_Candidates`) and their flat indices best first: the fewest
    estimated cycles, then DRAM bytes, then loop order. Kept per conv and the design fields a
    score sees (not the buffer sizes, which only decide which candidates fit): the candidates per
    array, bits and shadow, their order per DRAM rate and buffering too."""
    g = _Geometry(config, conv)
    out_b = config.input_bits // 8 if requant else (4 if config.acc_bits <= 32 else 8)
    key = (g.R, g.C, config.input_bits, out_b, config.shadow_stationary, conv)
    c = _CANDIDATES.get(key)
    if c is None:
        if len(_CANDIDATES) >= _CACHE_SIZE:
            _CANDIDATES.clear()
        c = _CANDIDATES[key] = _candidates(g, out_b)
    ranked_key = (*key, config.double_buffered, g.bytes_per_cycle)
    best = _RANKINGS.get(ranked_key)
    if best is None:
        if len(_RANKINGS) >= 2 * _CACHE_SIZE:
            _RANKINGS.clear()
        dma = c.dram / g.bytes_per_cycle
        score = np.trunc(np.maximum(c.compute, dma) if config.double_buffered else c.compute + dma)
        best = _RANKINGS[ranked_key] = np.lexsort((np.arange(len(score)), c.dram, score)).astype(np.int32)
    return best, c


def _candidates(g: _Geometry, out_b: int) -> _Candidates:
    """:class:`_Candidates` of ``g``'s conv (``out_b`` bytes an output lane), every candidate at once."""
    cfg, conv, R, C, N = g.config, g.conv, g.R, g.C, g.N
    ib = cfg.input_bits // 8
    most = max(b - a for a, b in (g.filter_words(n0, min(n0 + g.cpo, N)) for n0 in range(0, N, g.cpo)))
    most = max(most, g.filter_words(0, N)[1] - g.filter_words(0, N)[0])
    cl, nl = _levels(most), _levels(N, min(C, N))
    tl, rl = _tap_levels(conv.kh, conv.kw), g.row_levels()
    # Output-row tiles per size: most band rows, tiles, band rows summed, tiles per pixel count.
    band_rows, mt, band_sum = (np.zeros(len(rl), dtype=np.int64) for _ in range(3))
    tiles_of: list[Counter[int]] = []
    n_img = g.images
    for i, r in enumerate(rl):
        if r > g.out_h:  # whole images (``_Geometry.m_tiles``)
            k = r // g.out_h
            counts = np.minimum(np.arange(0, n_img, k) + k, n_img) - np.arange(0, n_img, k)
            band_rows[i], mt[i], band_sum[i] = counts.max() * conv.h, len(counts), n_img * conv.h
            tiles_of.append(Counter((counts * g.out_h * g.out_w).tolist()))
            continue
        oy = np.arange(0, g.out_h, r)
        oy1 = np.minimum(oy + r, g.out_h)
        top = oy * conv.stride_h - conv.pad_h
        bottom = (oy1 - 1) * conv.stride_h - conv.pad_h + (conv.kh - 1) * conv.dilation_h + 1
        rows = np.maximum(np.minimum(conv.h, bottom) - np.maximum(0, top), 0)
        band_rows[i], mt[i], band_sum[i] = rows.max(), len(oy) * n_img, rows.sum() * n_img
        tiles_of.append(Counter({p: c * n_img for p, c in Counter(((oy1 - oy) * g.out_w).tolist()).items()}))
    pix = np.array(sorted({p for tiles in tiles_of for p in tiles}), dtype=np.int64)
    at_pix = {p: i for i, p in enumerate(pix.tolist())}
    per_pix = np.zeros((len(rl), len(pix)), dtype=np.int64)
    for i, tiles in enumerate(tiles_of):
        for p, count in tiles.items():
            per_pix[i, at_pix[p]] = count
    # Filter tiles per size (``_sizes``): channel words, first block kept from the tile before, columns.
    words, shared, single = (np.zeros((len(cl), len(nl)), dtype=np.int64) for _ in range(3))
    wsum, nts, cols = (np.zeros(len(nl), dtype=np.int64) for _ in range(3))
    c_col = np.array(cl, dtype=np.int64)[:, None]
    kinds: list[tuple[int, int, int, int]] = []  # (filter tile size index, span, filters, tiles)
    for j, n_t in enumerate(nl):
        n0 = np.arange(0, N, n_t)
        n1 = np.minimum(n0 + n_t, N)
        w0 = (n0 // g.cpo) * g.cpg // R
        w1 = -(-(((n1 - 1) // g.cpo + 1) * g.cpg) // R)
        span, filt = w1 - w0, n1 - n0
        col = -(-filt // C) * C
        weights = g.taps * span * R * col * ib
        first = np.minimum(w0 + c_col, w1)
        last = w0 + (-(-span // c_col) - 1) * c_col
        kept = np.zeros(first.shape, dtype=bool)
        kept[:, 1:] = (w0[1:] == last[:, :-1]) & (first[:, 1:] == w1[:-1])
        words[:, j] = span.sum()
        shared[:, j] = ((first - w0) * kept).sum(axis=1)
        single[:, j] = (weights * (span <= c_col)).sum(axis=1)
        wsum[j], nts[j], cols[j] = weights.sum(), len(n0), col.sum()
        kinds += [(j, s, f, c) for (s, f), c in Counter(zip(span.tolist(), filt.tolist(), strict=True)).items()]
    # Run cycles per (filter, channel block, tap tile) size and pixel count (``_run_shapes``).
    taps_of = [Counter((ky1 - ky0) * (kx1 - kx0) for ky0, ky1, kx0, kx1 in g.tap_tiles(t)) for t in tl]
    at, ks, ns, weight = [], [], [], []
    for j, run_span, run_filt, count in kinds:
        for i, c_t in enumerate(cl):
            full, rest = divmod(run_span, c_t)
            for q, taps in enumerate(taps_of):
                cell = (j * len(cl) + i) * len(tl) + q
                for tp, tc in taps.items():
                    for size, times in ((c_t, full), (rest, 1 if rest else 0)):
                        if times:
                            at.append(cell)
                            ks.append(tp * size * R)
                            ns.append(run_filt)
                            weight.append(count * tc * times)
    cyc = timing.run_cycles(0, R, C, pix[None, :], np.array(ks)[:, None], np.array(ns)[:, None],
                            cfg.shadow_stationary).astype(np.int64)
    per_cell = np.zeros((len(nl) * len(cl) * len(tl), len(pix)), dtype=np.int64)
    np.add.at(per_cell, np.array(at, dtype=np.int64), cyc * np.array(weight, dtype=np.int64)[:, None])
    compute = per_cell.reshape(len(nl), len(cl), len(tl), len(pix)) @ per_pix.T  # (n, c, t, r)
    compute = compute.transpose(1, 3, 0, 2)[..., None]  # (c, r, n, t, 1)
    # DRAM bytes: the image's bands, the weights, the output (``_dram_bytes``).
    one_tap = np.array([len(g.tap_tiles(t)) == 1 for t in tl])[None, None, None, :, None]
    order = np.array([0, 1])[None, None, None, None, :]
    mt5, bs5 = mt[None, :, None, None, None], band_sum[None, :, None, None, None]
    keep = (order == 0) | (mt5 == 1)
    a = bs5 * conv.w * R * ib * (words[:, None, :, None, None] - shared[:, None, :, None, None] * keep)
    one = single[:, None, :, None, None] * one_tap  # weight bytes read once (filter tiles of one run)
    w5 = wsum[None, None, :, None, None]
    b_mn = np.where((nts[None, None, :, None, None] == 1) & (one == w5) & one_tap, w5, mt5 * w5)
    b_nm = one + mt5 * (w5 - one)
    dram = a + np.where(order == 0, b_mn, b_nm) + g.M * cols[None, None, :, None, None] * out_b
    shape = np.broadcast_shapes(compute.shape, dram.shape)
    cols_n = -(-np.array(nl) // C)
    c2 = np.array(cl)[:, None]
    return _Candidates(
        shape=shape, compute=np.broadcast_to(compute, shape).reshape(-1), dram=np.broadcast_to(dram, shape).reshape(-1),
        band=band_rows[None, :] * conv.w * c2,
        weight=np.array(tl)[None, None, :] * R * c2[:, :, None] * cols_n[None, :, None],
        ofmap=np.array(rl)[:, None] * g.out_w * cols_n[None, :], levels=(cl, rl, nl, tl),
        smallest_band=int(band_rows[0]) * conv.w)


@dataclasses.dataclass(frozen=True)
class ConvProgram(GemmProgram):
    """A ``GemmProgram`` of one conv image, with its tiling (``tensors['a']`` is the NHWC image)."""

    tiling: ConvTiling = ConvTiling("ok", "")
    parts: tuple[Part, ...] = ()  # per run: channel words and tap tile ``(c0, c1, ky0, ky1, kx0, kx1)``


class _ConvBuilder(_Builder):
    """The GEMM compiler's builder with the A side as bands and each RUN behind its WINDOW."""

    def __init__(self, g: _Geometry, tensors: dict[str, TensorLayout], W: int, parts: dict[Tile, Part],
                 name: str, queue_depth: int) -> None:
        super().__init__(g.config, tensors, {"a": g.R, "b": g.C, "c": g.C}, W, (g.M, 0, g.N))
        self.g, self.parts, self.name, self.queue_depth = g, parts, name, queue_depth
        self.window: ConvWindow | None = None
        self.window_load = -1  # the queue-load of the last WINDOW

    def _band(self, tile: tuple[int, ...]) -> tuple[int, int, int, Part]:
        """``(first input row, rows, pad_top, part)`` of the band a run reads."""
        m0, m1 = tile[0], tile[1]
        oy0, oy1 = m0 // self.g.out_w, -(-m1 // self.g.out_w)
        return (*self.g.band(oy0, oy1), self.parts[tuple(tile[:7])])  # type: ignore[index]

    def tile_words(self, name: str, tile: tuple[int, ...]) -> int:
        if name != "a":
            return super().tile_words(name, tile)
        _, rows, _, part = self._band(tile)
        return rows * self.g.conv.w * (part[1] - part[0])

    def transfer(self, opcode: int, name: str, tile: tuple[int, ...], buf_addr: int, *, wait_run: bool = False,
                 **kwargs: object) -> Command:
        if name != "a":
            return super().transfer(opcode, name, tile, buf_addr, wait_run=wait_run, **kwargs)  # type: ignore[arg-type]
        r0, rows, _, (c0, c1, *_) = self._band(tile)
        t, w, ct = self.tensors["a"], self.g.conv.w, c1 - c0
        addr = t.base + r0 * w * t.pitch + c0 * self.g.R * t.elem_bytes
        if ct == self.g.words:  # whole pixels: one DRAM row per input row
            fields = dict(rows=rows, words=w * ct, dram_stride=w * t.pitch, row_step=w * ct)
        else:  # a channel block: one DRAM row per pixel
            fields = dict(rows=rows * w, words=ct, dram_stride=t.pitch, row_step=ct)
        for key in ("rows", "words"):
            if fields[key] >= 1 << 16:
                raise ModelError(f"{self.name}: a band LOAD of {fields[key]} {key} exceeds the 16-bit field")
        return Command.make(opcode, wait_run=wait_run, buffer=Buffer.IFMAP, dram_addr=addr, buf_addr=buf_addr,
                            word_step=1, **fields)

    def run(self, tile: tuple[int, ...], bases: dict[str, int], *, wait_dma: bool = True) -> Command:
        """The RUN of ``tile`` with ``window``; its WINDOW goes first when it differs from the last one
        or the RUN starts a new queue-load (the window registers are cleared at each START)."""
        _, rows, pad_top, (c0, c1, ky0, _, kx0, kx1) = self._band(tile)
        cv = self.g.conv
        image_rows = self.g.image_rows(tile[0] // self.g.out_w, -(-tile[1] // self.g.out_w))
        window = ConvWindow(in_w=cv.w, in_h=cv.h if image_rows else rows, out_w=self.g.out_w, stride_h=cv.stride_h,
                            stride_w=cv.stride_w, dilation_h=cv.dilation_h, dilation_w=cv.dilation_w, kw=kx1 - kx0,
                            pad_top=pad_top - ky0 * cv.dilation_h, pad_left=cv.pad_w - kx0 * cv.dilation_w,
                            cw=c1 - c0, cblocks=c1 - c0, image_rows=image_rows)
        while window != self.window or len(self.out) // self.queue_depth != self.window_load:
            self.window, self.window_load = window, len(self.out) // self.queue_depth
            self.add(window.command(what=self.name))
        m0, m1, k0, k1, n0, n1, acc = tile
        return Command.make(Opcode.RUN, wait_dma=wait_dma, m=m1 - m0, k=k1 - k0, n=n1 - n0, accumulate=int(acc),
                            x_base=bases["a"], y_base=bases["b"], o_base=bases["c"], window=1)


def _place(b: _ConvBuilder, runs: list[Tile], room: tuple[int, int, int], half: tuple[int, int, int]
           ) -> list[tuple[dict[str, int], list[tuple[str, int]]]]:
    """Per run: the buffer base of each operand's tile and the loads it needs (a tile goes to the
    half its predecessor in that buffer did not use; a band is kept while the next run reads the
    same band and channel words)."""
    held: dict[str, object] = {"a": None, "b": None, "c": None}
    side = {"a": 1, "b": 1, "c": 1}
    out = []
    for tile in runs:
        m0, m1, k0, k1, n0, n1, _ = tile
        keys = {"a": (m0, m1, b.parts[tile][:2]), "b": (k0, k1, n0, n1), "c": (m0, m1, n0, n1)}
        bases, loads = {}, []
        for i, name in enumerate(("a", "b", "c")):
            if held[name] != keys[name]:
                side[name] ^= 1
                held[name] = keys[name]
                if name != "c":
                    loads.append((name, side[name] * half[i]))
            words = b.tile_words(name, tile)
            if words > room[i]:
                raise ModelError(f"{b.name}: a tile of {name.upper()} needs {words} buffer words, more than the "
                                 f"{room[i]} it may use")
            bases[name] = side[name] * half[i]
        out.append((bases, loads))
    return out


def conv_estimate(config: ArrayConfig, conv: Conv2d, tiling: ConvTiling) -> int:
    """Cycles of one image on chip, estimated (for the choice of :func:`conv_path`, not a result):
    the runs' ``run_cycles`` and the tiling's DRAM bytes at the design's rate, overlapped when
    double buffered, in series when not."""
    return _estimate(_Geometry(config, conv), tiling)


def _estimate(g: _Geometry, t: ConvTiling) -> int:
    """:func:`conv_estimate`: the run cycles summed over the distinct run shapes."""
    _, pixels, _ = _sizes(g, t)
    shapes = _run_shapes(g, t)
    compute = sum(cp * count * g.run(p, k, n) for p, cp in Counter(pixels).items() for (k, n), count in shapes.items())
    dma = t.dram_bytes / g.bytes_per_cycle
    return int(max(compute, dma) if g.config.double_buffered else compute + dma)


def conv_path(config: ArrayConfig, conv: Conv2d, *, requant: bool = False) -> tuple[str, str]:
    """``("chip", "")`` when ``config`` runs ``conv`` with windows built on chip, else ``("host",
    reason)``: the host builds the im2col ``A`` (a design that does not build windows, or one on
    which the model scores the im2col GEMM, all images in one program, faster than the on-chip
    programs, one an image: few input channels on many array rows, as in a network's first layer,
    or a batch whose weights the per-image programs read once an image). An on-chip conv that does
    not fit is ``("infeasible", reason)`` (the reason names the op and the words it needs).

    The choice is the model's (``perf_model.evaluator.conv_ops``): ``evaluate`` and the sweep
    score the conv the way this path runs it. ``requant`` must say what ``conv.requant`` does.
    """
    why = conv_served(config)
    if why:
        return "host", why
    from perf_model.evaluator.one_design import evaluate_op

    if requant != (conv.requant is not None):
        raise ModelError(f"requant={requant} but the conv's requant is {conv.requant!r}")
    result = evaluate_op(config, conv)
    return result.conv_path or "host", result.conv_note


def compile_conv(config: ArrayConfig, conv: Conv2d, *, requant: bool = False, queue_depth: int = QUEUE_DEPTH,
                 tiling: ConvTiling | None = None) -> ConvProgram:
    """The program of one image of ``conv`` on ``config`` (module docstring); ``tiling`` replaces
    the search's (tests: tap tiles on a small array).

    Raises:
        ModelError: the design does not build windows (not WS), the conv is infeasible (the
            tiling's reason), a window field or a transfer does not fit its encoding, or a
            requantised op has more than :data:`QPARAM_CHANNELS` channels.
    """
    why = conv_served(config)
    if why:
        raise ModelError(f"design {config.short_name()}: {why}")
    if tiling is None:
        tiling = conv_tiling(config, conv, requant=requant)
    if not tiling.feasible:
        raise ModelError(f"design {config.short_name()} cannot run the conv on chip: {tiling.reason}")
    if requant and conv.c_out > QPARAM_CHANNELS:
        raise ModelError(f"a requantised op has at most {QPARAM_CHANNELS} output channels, not {conv.c_out}")
    g = _Geometry(config, conv)
    pairs = list(g.tiles(tiling))
    runs = [t for t, _ in pairs]
    parts = dict(pairs)
    k_rows = max(t[3] for t in runs)
    W = axi_data_bytes(config)
    ib = config.input_bits // 8
    base = _align((2 + 6 * len(runs)) * COMMAND_BYTES, PAGE)
    tensors: dict[str, TensorLayout] = {}
    specs = {"a": (conv.n * conv.h * conv.w, g.words * g.R, ib, (conv.n * conv.h * conv.w, conv.c_in)),
             "b": (k_rows, _align(g.N, g.C), ib, (k_rows, g.N)),
             "c": (g.M, _align(g.N, g.C), ib if requant else (4 if config.acc_bits <= 32 else 8), (g.M, g.N))}
    for name, (rows, row_elems, elem, shape) in specs.items():
        tensors[name] = TensorLayout(name, base, rows, row_elems, elem, False, shape)
        base = _align(base + tensors[name].nbytes, PAGE)
    if requant:
        tensors["q"] = TensorLayout("q", base, 1, _align(g.N, g.C), 16, False, (1, g.N))
        base = _align(base + tensors["q"].nbytes, PAGE)
    what = conv.name or "conv"
    if queue_depth < 1 or queue_depth % queue_entry_commands(W):
        raise ModelError(f"queue_depth must be a positive multiple of {queue_entry_commands(W)} commands, "
                         f"not {queue_depth}")
    b = _ConvBuilder(g, tensors, W, parts, what, queue_depth)
    if requant:
        qt = tensors["q"]
        b.add(Command.make(Opcode.LOAD, buffer=Buffer.QPARAM, dram_addr=qt.base, dram_stride=qt.pitch, rows=1,
                           words=qt.row_elems // g.C, buf_addr=0, row_step=0, word_step=1))
    room = _room(config)
    half = tuple(r if config.double_buffered else 0 for r in room)
    placed = _place(b, runs, room, half)  # type: ignore[arg-type]
    (_double if config.double_buffered else _single)(b, runs, placed, requant)  # type: ignore[arg-type]
    total = len(b.out)
    chunks = tuple((i, min(i + queue_depth, total)) for i in range(0, total, queue_depth))
    return ConvProgram(tuple(b.out), tensors, 0, base, W, requant, tuple(runs), chunks, tiling,
                       tuple(parts[t] for t in runs))


def conv_weight_matrix(conv: Conv2d, program: ConvProgram, rows: int, weights: np.ndarray) -> np.ndarray:
    """The ``b`` matrix of ``program`` from HWIO ``weights`` (``kh x kw x c_in/groups x c_out``)
    on an array of ``rows`` rows (module docstring)."""
    w = np.asarray(weights)
    want = (conv.kh, conv.kw, conv.c_in // conv.groups, conv.c_out)
    if w.shape != want:
        raise ValueError(f"conv weights must have shape {want}, not {w.shape}")
    cpg, cpo = conv.c_in // conv.groups, conv.c_out // conv.groups
    R = rows
    out = np.zeros(program.tensors["b"].shape, dtype=np.int64)
    done = set()
    for tile, (c0, c1, ky0, ky1, kx0, kx1) in zip(program.runs, program.parts, strict=True):
        k0, k1, n0, n1 = tile[2:6]
        if (k0, n0, n1) in done:
            continue
        done.add((k0, n0, n1))
        chans = np.arange(c0 * R, c1 * R)  # one tap's rows: channel word, lane
        ns = np.arange(n0, n1)
        group = ns // cpo
        inside = (chans[:, None] >= group[None, :] * cpg) & (chans[:, None] < (group[None, :] + 1) * cpg)
        local = np.clip(chans[:, None] - group[None, :] * cpg, 0, cpg - 1)
        at = k0
        for ky in range(ky0, ky1):
            for kx in range(kx0, kx1):
                out[at:at + len(chans), n0:n1] = np.where(inside, w[ky, kx][local, ns[None, :]], 0)
                at += len(chans)
        if at != k1:
            raise ModelError(f"a run of {k1 - k0} weight rows reads {at - k0} (its taps and channel words)")
    return out
