"""A conv network's transfers of NHWC tensors and its poolings through DRAM (``conv_network``'s parts),
and a timed network's DRAM link builds kept across networks (:class:`TimedLink`).

:func:`nhwc` is the LOAD (or STORE) of a whole NHWC tensor or a band of its pixels between DRAM (a
DRAM row a pixel, ``compile_conv``'s ``a``/``c`` layouts) and an ifmap region (pixel ``p``'s word
``f`` at ``region + p * words + f``); :func:`pool_bands` runs a pooling over a conv's stored output
in bands of rows and stores the pooled tensor.
"""

from __future__ import annotations

import functools
from typing import Any

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import FIELDS, Buffer, Command, Opcode
from accel_spec.vector_isa import VECTOR_CODES, PoolGeometry, pool_geometry, pool_registers
from perf_model.compiler.network import PIPELINE_CHUNKS, _chunked, pipelined
from perf_model.compiler.program import TensorLayout, _buffer_depths, narrow_lanes
from perf_model.compiler.vector import VectorRegisters, vector_commands
from perf_model.program_timing import axi_data_bytes, timed_transfers
from perf_model.vector_timing import VectorPlan
from workloads.ops import Conv2d, Gemm
from workloads.vector_ops import VectorOp

__all__ = ["nhwc", "pool_bands", "TimedLink", "WORDS_MAX"]

#: The most words one row of a transfer holds (the command's ``words`` field).
WORDS_MAX = (1 << FIELDS["words"][1]) - 1

def nhwc(config: ArrayConfig, t: TensorLayout, opcode: int, region: int, wait_vec: int = 0, row0: int = 0,
          rows: int | None = None) -> Command:
    """The LOAD (or STORE) of the whole NHWC tensor ``t`` (a DRAM row a pixel) to (from) ``region``,
    or of its ``rows`` pixels from pixel ``row0``; pixels of whole words (no narrowed lanes) move as
    DRAM rows of several pixels (:func:`_group`), the same bytes to the same ifmap words."""
    lanes = config.rows
    channels = t.shape[1]
    words = -(-channels // lanes)
    narrow = narrow_lanes(channels, lanes, t.elem_bytes, axi_data_bytes(config)) if words == 1 else 0
    count = t.rows if rows is None else rows
    group = 1 if narrow or words * lanes * t.elem_bytes != t.pitch else _group(count, words)
    return Command.make(opcode, wait_vec=wait_vec, buffer=Buffer.IFMAP, dram_addr=t.base + row0 * t.pitch,
                        dram_stride=t.pitch * group, rows=count // group, words=words * group, buf_addr=region,
                        row_step=words * group, word_step=1, **({"lanes": narrow} if narrow else {}))


def _group(pixels: int, words: int) -> int:
    """Pixels one DRAM row of a transfer of ``pixels`` contiguous pixels of ``words`` whole words
    each takes: the most that divide ``pixels`` and fit the command's ``words`` field. The ifmap
    placement and the bytes are those of a row a pixel; the bursts are longer (a burst never spans
    two rows: ``dma_timing.bursts``), so a transfer of narrow pixels is not one DRAM latency a pixel."""
    most = WORDS_MAX // words
    if pixels <= most:
        return max(pixels, 1)
    best = 1
    d = 1
    while d * d <= pixels:
        if pixels % d == 0:
            for g in (d, pixels // d):
                if best < g <= most:
                    best = g
        d += 1
    return best


def pool_bands(config: ArrayConfig, conv: Conv2d, stand_in: Gemm, link: tuple[VectorOp, ...], i: int,
               skip: str | None, tensors: dict[str, TensorLayout], depth: int | None = None) -> list[Command]:
    """Link ``i``'s ops through DRAM when a pooling ends it: the ops before it in chunks over conv
    ``i``'s stored output ``c{i}`` (``network._chunked`` over ``stand_in``, the output a DRAM row a
    pixel), then the pooling in bands of output rows:
    LOAD the band's input rows (its windows' rows, clipped to the image) into the ifmap, ``VECTOR``
    over them with the band's geometry (its first window row's offset as the top padding, its own
    output rows), ``STORE`` the pooled rows to ``p{i}``. A band's input and output fit the ifmap together;
    when the map is more than one band and a band of one output row fits half the ifmap, the bands
    (at least ``network.PIPELINE_CHUNKS``) take turns in the two halves, the next loading while the
    unit pools this one (``network.pipelined``). ``depth``: the ifmap words from 0 the bands may use
    (default: all of it; below the regions a network holds on chip while the link runs)."""
    *before, pool = link
    lanes = config.vector_lanes
    out = _chunked(config, stand_in, tuple(before), f"c{i}", skip, tensors, True, depth) if before else []
    src, dst = tensors[f"c{i}"], tensors[f"p{i}"]
    p = dict(pool.params)
    _, h, w, c = pool.shape
    g0 = pool_geometry(pool.kind, pool.shape, p, 1)
    if isinstance(g0, str):
        raise ModelError(g0)
    oh, ow = g0.out_h, g0.out_w
    wh, sh, ph = p["window_h"], p["stride_h"], p["pad_h"]
    words_c = -(-c // lanes)
    depth = _buffer_depths(config)[0] if depth is None else depth

    def band_rows(oy0: int, oy1: int) -> tuple[int, int]:
        return max(0, oy0 * sh - ph), min(h, (oy1 - 1) * sh - ph + wh)

    def fits(per: int, words: int) -> bool:  # a band of ``per`` output rows: its input rows and its output
        return (((per - 1) * sh + wh) * w + per * ow) * words_c <= words

    if not fits(1, depth):
        raise ModelError(f"link {i}: a band of {wh} rows of the {h}x{w}x{c} map does not fit the ifmap ({depth} "
                         "words) with its pooled row")
    # bands in the two halves of the ifmap, the next loading while the unit pools this one, when
    # the whole map is more than one band and a band of a row fits a half
    halves = oh * conv.n > 1 and fits(1, depth // 2)
    room = depth // 2 if halves else depth
    per = -(-oh * conv.n // PIPELINE_CHUNKS) if halves else oh
    while per > 1 and not fits(per, room):
        per -= 1
    steps: list[tuple[list[Command], list[list[Command]], Command]] = []
    for img in range(conv.n):
        for oy0 in range(0, oh, per):
            oy1 = min(oh, oy0 + per)
            r0, r1 = band_rows(oy0, oy1)
            in_words = (r1 - r0) * w * words_c
            base = depth // 2 * (len(steps) % 2) if halves else 0
            g = PoolGeometry(pool.kind, r1 - r0, w, oy1 - oy0, ow, wh, p["window_w"], sh, p["stride_w"],
                             r0 - (oy0 * sh - ph), p["pad_w"], words_c)
            plan = VectorPlan(pool.kind, lanes, 1, in_words, c, 1, 1, g)
            regs = VectorRegisters(plan, VECTOR_CODES[pool.kind], base, base, base + in_words, pool_registers(g))
            steps.append(([nhwc(config, src, Opcode.LOAD, base, wait_vec=1, row0=(img * h + r0) * w,
                                 rows=(r1 - r0) * w)],
                          [vector_commands(regs, wait_dma=1)],
                          nhwc(config, dst, Opcode.STORE, base + in_words, wait_vec=1, row0=(img * oh + oy0) * ow,
                                rows=(oy1 - oy0) * ow)))
    if halves:
        return out + pipelined(steps)
    return out + [cmd for loads, (vector,), store in steps for cmd in (*loads, *vector, store)]


class TimedLink:
    """A timed network's DRAM link build on ``config``: its commands made at the first call, their
    transfers timed (``program_timing.timed_transfers``), and kept in ``memo`` under ``key`` (its walk
    reads no DRAM address, and every placement moves a tensor by whole pages, so the bursts are the
    same), and across networks in :data:`_LINK_BUILDS` by ``shared`` (the design's fields but its
    buffer sizes, which a link sees through its ``depth`` only, and the link's own arguments) and the
    layouts of the tensors it ``reads`` but for their page-aligned bases."""

    def __init__(self, config: ArrayConfig, build: functools.partial[list[Command]],
                 memo: dict[tuple[object, ...], Any], key: tuple[object, ...], shared: tuple[object, ...],
                 reads: tuple[str, ...]) -> None:
        self.config, self.build, self.func, self.memo, self.key = config, build, build.func, memo, key
        self.shared, self.reads = shared, reads

    def __call__(self, tensors: dict[str, TensorLayout]) -> list[Command]:
        got = self.memo.get(self.key)
        if got is None:
            key = (self.func, self.shared, tuple(_unplaced(tensors[n]) for n in self.reads))
            got = _LINK_BUILDS.get(key)
            if got is None:
                got = timed_transfers(self.config, self.build(tensors))
                if len(_LINK_BUILDS) >= _LINK_BUILDS_SIZE:
                    _LINK_BUILDS.clear()
                _LINK_BUILDS[key] = got
            self.memo[self.key] = got
        return got  # type: ignore[no-any-return]


def _unplaced(t: TensorLayout) -> tuple[object, ...]:
    """``t``'s layout but its base."""
    return t.name, t.rows, t.row_elems, t.elem_bytes, t.transposed, t.shape, t.packed


#: Timed networks' DRAM link commands across networks (:class:`TimedLink`).
_LINK_BUILDS: dict[tuple[object, ...], list[Command]] = {}
_LINK_BUILDS_SIZE = 1 << 10
