"""The geometry of a convolution run on chip: its tilings and the sizes they derive (internal).

``perf_model.compiler.conv`` (its module docstring: the op as the array sees it, the DRAM
layout, the program) compiles a conv; this module holds what the compiler, the tiling search
(``conv_search``) and the schedule (``conv_schedule``) share: :class:`ConvTiling`, the derived
sizes of a conv on a design (``_Geometry``: output-row tiles within an image or of whole images,
bands, filter tiles, tap tiles) and the tile-size levels the search tries.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.isa import FIELDS
from perf_model import timing
from perf_model.compiler.program import _buffer_depths, dense_row_elems, narrow_lanes
from perf_model.program_timing import axi_data_bytes, dram_rate
from workloads.ops import Conv2d

__all__ = ["ConvTiling", "conv_served", "pack_taps"]

Tile = tuple[int, int, int, int, int, int, bool]
Part = tuple[int, int, int, int, int, int]


#: The most taps a packed word holds: ``T`` is the window's ``dilation_w`` (``accel_spec.isa.FIELDS``,
#: 4 bits: at most 15), a power of two: 8.
MAX_PACKED_TAPS = 1 << (FIELDS["dilation_w"][1] - 1)


def pack_taps(config: ArrayConfig, conv: Conv2d, a_lanes: int) -> int:
    """``log2 T`` of the taps a word packs for ``conv`` on ``config`` (0: one tap a word): pixels of
    one narrow word of ``a_lanes`` lanes (``T = R / a_lanes``, at least 2), one group, no dilation
    along x, several taps a kernel row (``perf_model.compiler.conv_pack``), and ``T`` within the
    ``WINDOW``'s ``dilation_w`` field (a packed window steps ``T`` words a group: at most
    :data:`MAX_PACKED_TAPS`; a wider array over narrower pixels runs one tap a word)."""
    R = config.rows
    if (not a_lanes or conv.groups != 1 or conv.dilation_w != 1 or conv.kw < 2 or R % a_lanes
            or R & (R - 1) or config.dataflow is not Dataflow.WS or R // a_lanes > MAX_PACKED_TAPS):
        return 0
    return (R // a_lanes).bit_length() - 1


def row_bytes_of(filters: np.ndarray, C: Any, elem: Any, W: Any) -> np.ndarray:
    """``_Geometry.row_bytes`` over arrays (of filter counts, and of ``C``, ``elem`` and ``W`` too,
    broadcast): whole words of ``C`` lanes, or, fewer than ``C`` filters, a power of two of AXI
    beats of ``W`` bytes, at most a word."""
    words = -(-filters // C) * C * elem
    beats = -(-filters * elem // W)
    pow2 = np.left_shift(1, np.ceil(np.log2(np.maximum(beats, 1))).astype(np.int64)) * W
    return np.where(filters < C, np.minimum(pow2, C * elem), words)


def weight_tiles_held(config: ArrayConfig) -> int:
    """Weight tiles a conv keeps in the weight buffer from run to run (``conv._place``): one in each
    half double buffered, the last one single buffered (every tile at word 0)."""
    return 2 if config.double_buffered else 1


def conv_served(config: ArrayConfig) -> str:
    """``""`` when ``config`` builds conv windows on chip, else the reason it does not."""
    if config.dataflow is not Dataflow.WS:
        return (f"conv windows are built on chip by weight-stationary designs only; an "
                f"{config.dataflow.value.upper()} design runs a conv as the host's im2col GEMM")
    if config.packed_kinds:  # the window walk reads byte lanes (docs/formats.md, "Packed int4")
        return "conv windows read byte lanes; a pack_int4 design runs a conv as the host's im2col GEMM"
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

    def __init__(self, config: ArrayConfig, conv: Conv2d, *, pack: bool = True) -> None:
        self.config, self.conv = config, conv
        self.R, self.C = config.rows, config.cols
        self.words = math.ceil(conv.c_in / self.R)  # ifmap words per pixel in DRAM
        self.cpg, self.cpo = conv.c_in // conv.groups, conv.c_out // conv.groups
        self.out_h, self.out_w = conv.out_h, conv.out_w
        self.images = conv.n
        # Tiles of whole images (several images a run) when an image's input is ``out_h * stride_h``
        # rows (``image_rows`` of the window: the images' bands back to back, all their rows, the
        # last ones loaded even when no tap reads them, as a 1x1 stride-2 conv's last row).
        self.stack = conv.n > 1 and self.out_h * conv.stride_h == conv.h
        self.M, self.N = conv.n * self.out_h * self.out_w, conv.c_out
        # DRAM: NHWC pixels without zero lanes (fewer channels than rows: whole AXI beats, narrow loads).
        self.W = axi_data_bytes(config)
        self.ib = config.input_bits // 8
        self.a_lanes = narrow_lanes(conv.c_in, self.R, self.ib, self.W) if self.words == 1 else 0
        self.a_word_bytes = (self.a_lanes or self.R) * self.ib  # one pixel's channel word in DRAM
        self.a_pitch = self.words * self.a_word_bytes  # one pixel (``dense_row_elems`` of ``c_in``)
        # Weight rows a tap has in DRAM: with narrow pixels and one filter tile of at most ``C``
        # filters, only the ``a_lanes`` rows the bands fill (the ifmap's other lanes are zero, so
        # their weight rows are never used: not loaded); else all ``R`` of its channel word.
        self.kl = self.a_lanes if self.a_lanes and conv.c_out <= self.C else self.R
        # Tap packing (``perf_model.compiler.conv_pack``): ``T = R / a_lanes`` taps of a kernel row a
        # word when the pixel is one narrow word, one group, no dilation along x and several taps a
        # row; a run's "tap" is then a group of ``T`` (``kw`` groups a kernel row), a tap's weight
        # rows all ``R``, and a band load reads ``T - 1`` pixels past the band (``extra``).
        self.pack = pack_taps(config, conv, self.a_lanes) if pack else 0
        self.T = 1 << self.pack
        self.kw = -(-conv.kw // self.T)
        self.taps = conv.kh * self.kw
        self.extra = self.T - 1
        if self.pack:
            self.kl = self.R
        rate = dram_rate(config)
        self.bytes_per_cycle = float(rate if rate is not None else self.W)
        self.sizes: dict[tuple[int, int, int], tuple[list[int], list[int], list[tuple[int, int, int, int]]]] = {}
        self.shapes: dict[tuple[int, int, int], Counter[tuple[int, int]]] = {}
        self.filter_tiles: dict[int, Counter[tuple[int, int]]] = {}

    def row_bytes(self, filters: int, elem: int) -> int:
        """DRAM bytes of a row of ``filters`` filters (a weight row or an output pixel of a filter tile)
        of ``elem`` bytes each: whole words of ``C`` lanes, or, fewer than ``C``, a power of two of
        AXI beats (``perf_model.compiler.program.narrow_lanes``)."""
        return dense_row_elems(filters, self.C, elem, self.W) * elem

    def row_bytes_of(self, filters: np.ndarray, elem: Any) -> np.ndarray:
        """:meth:`row_bytes` over an array of filter counts (and of element bytes, broadcast)."""
        return row_bytes_of(filters, self.C, elem, self.W)

    def run(self, m: int, k: int, n: int) -> int:
        """``timing.run_cycles`` of one run of ``m x k x n`` (``timing.run_cycles_of``: kept per shape)."""
        return timing.run_cycles_of(0, self.R, self.C, m, k, n, bool(self.config.shadow_stationary))

    def row_levels(self) -> list[int]:
        """Output rows per output-row tile: powers of two of an image's rows and all of them, then
        (images stacked) powers of two of whole images and all images, as long as their band's
        pixels fit a ``LOAD``'s 16-bit ``rows`` field."""
        levels = _levels(self.out_h)
        if self.stack:  # bands a LOAD can move: fewer than 2 ** 16 pixels (rows of a channel block)
            levels += [k * self.out_h for k in _levels(self.images)[1:] if k * self.conv.h * self.conv.w < 1 << 16]
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
        kh, kw = self.conv.kh, self.kw
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
    the filter tile before (the band stays), and its filters;
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
            filters.append((w1 - w0, first[1] - first[0], int(first == last), n1 - n0))
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
