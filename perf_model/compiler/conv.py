"""The compiler of a convolution run on chip: NHWC bands in the ifmap, windows built by the RTL.

``compile_conv`` turns a :class:`~workloads.ops.Conv2d` (all its ``n`` images) into a program for a
weight-stationary design (the address generator, ``rtl_gen.core.conv_addr``, serves the WS
controller's x stream). Nothing is im2col'd by the host: the input crosses the DRAM interface
once per output tile's band (plus the halo rows two bands share), the pads are made on chip.

The op as the array sees it: a GEMM of ``M = n * out_h * out_w`` output pixels (streamed), ``N =
c_out`` filters (columns) and ``K = taps * words * R`` (rows: ``taps = kh * kw``, each tap's
input channels padded to whole ifmap words of ``R`` lanes). Its runs are the compiler's tiles
``(m0, m1, k0, k1, n0, n1, accumulate)`` of that GEMM, so ``perf_model.timing.run_cycles`` times
them unchanged:

* ``m`` in whole output rows of one image (``rows_t`` rows a tile), whose input band is the
  rows ``oy0 * stride_h - pad_top .. (oy1 - 1) * stride_h - pad_top + (kh - 1) * dilation_h``
  clipped to the image (all columns), or, when ``out_h * stride_h == h``, in whole images
  (``rows_t`` a multiple of ``out_h``): the images' whole inputs back to back, one ``LOAD``, the
  window's ``image_rows = out_h`` (each image padded on chip);
* ``n`` in tiles of ``n_t`` filters (whole array columns);
* ``k`` in channel blocks of ``c_t`` words, each in tap tiles of ``taps_t`` taps (whole kernel
  rows, or part of one row when a row's taps do not fit the weight buffer), channel blocks
  outer: a run's ``K`` is ``taps_t * words * R``, its window the band's with the pads shifted by
  its first tap. A filter tile of a grouped convolution reads only the channel words its
  groups span (depthwise: one word per ``R`` filters); the weights of the other lanes are zero.
  The band of a channel block stays in the ifmap while its tap tiles run.

DRAM layout (every tensor on a 4 KiB page after the program):

    a  the images, NHWC: ``n * h * w`` rows (pixels) of ``ceil(c_in / R) * R`` channels (zero
       padded), or, with fewer channels than ``R``, of ``c_in`` channels rounded up to whole AXI
       beats only (``perf_model.compiler.program.dense_row_elems``): its bands load narrow words
       (``lanes``), the zero lanes made on chip
    b  the weights as the runs read them: for filter ``j`` (column), its tile's K rows in run
       order (channel block, tap tile, tap ``(ky, kx)``, channel word, lane), zeros elsewhere;
       a row of fewer filters than ``C`` is dense (whole beats), its tiles loaded narrow; with narrow
       pixels (``a``) and at most ``C`` filters, a tap keeps only its first ``a_lanes`` rows (the
       ifmap lanes beyond are zero, so those weights are never used): a tile's taps are one
       ``LOAD`` of a DRAM row a tap, ``R`` buffer words apart
    c  the output, NHWC: ``n * out_h * out_w`` rows of ``c_out`` channels, laid out and stored
       as a GEMM's C (dense below ``C`` channels: the next layer's ``a`` as it is)
    q  the output stage's parameters (requantised ops), as for a GEMM

A band is one ``LOAD``: ``band_rows`` DRAM rows of ``w * words`` words (all channel words of a
pixel) or, for a channel block, ``band_rows * w`` rows (pixels) of ``c_t`` words; in the ifmap
it sits in NHWC order, ``c_t`` words a pixel. Each run is a ``WINDOW`` (only when it differs from
the last one) and a ``RUN`` with ``window``. The schedule (single or double buffered, the stores
in parts) is the GEMM compiler's (``perf_model.compiler.program``).

The tiling is searched in ``conv_search`` (all tilings that fit, in whole output rows or whole
images, filter tiles of whole array columns and channel blocks, both loop orders with K
innermost), on the sizes ``conv_geometry`` derives. A band of one output row that does not fit
the ifmap is infeasible, with a reason naming the op and the words it needs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import COMMAND_BYTES, QUEUE_DEPTH, Buffer, Command, Opcode, queue_entry_commands
from perf_model.compiler.conv_geometry import ConvTiling, Part, Tile, _Geometry, _room, conv_served
from perf_model.compiler.conv_pack import packed_weights
from perf_model.compiler.conv_search import conv_estimate, conv_tiling
from perf_model.compiler.conv_window import ConvWindow
from perf_model.compiler.program import (
    PAGE,
    QPARAM_CHANNELS,
    GemmProgram,
    TensorLayout,
    _align,
    _Builder,
    _double,
    _single,
    narrow_lanes,
)
from perf_model.program_timing import axi_data_bytes, transfer_word_beats, word_beats
from workloads.ops import Conv2d

__all__ = ["ConvTiling", "ConvProgram", "compile_conv", "conv_tiling", "conv_weight_matrix", "conv_served",
           "conv_estimate"]


@dataclasses.dataclass(frozen=True)
class ConvProgram(GemmProgram):
    """A ``GemmProgram`` of one conv image, with its tiling (``tensors['a']`` is the NHWC image)."""

    tiling: ConvTiling = ConvTiling("ok", "")
    parts: tuple[Part, ...] = ()  # per run: channel words and tap tile ``(c0, c1, ky0, ky1, kx0, kx1)``
    k_lanes: int = 0  # weight rows of a tap's channel word in ``b`` (0: all ``R``; module docstring)
    pack: int = 0  # ``log2`` of the taps a word packs (``conv_pack``; 0: one tap a word)


class _ConvBuilder(_Builder):
    """The GEMM compiler's builder with the A side as bands and each RUN behind its WINDOW."""

    def __init__(self, g: _Geometry, tensors: dict[str, TensorLayout], W: int, parts: dict[Tile, Part],
                 name: str, queue_depth: int, a_region: int | None = None, c_region: int | None = None) -> None:
        super().__init__(g.config, tensors, {"a": g.R, "b": g.C, "c": g.C}, W, (g.M, 0, g.N), a_region, c_region)
        self.g, self.parts, self.name, self.queue_depth = g, parts, name, queue_depth
        self.window: ConvWindow | None = None
        self.window_load = -1  # the queue-load of the last WINDOW
        self.beats = word_beats(g.config)

    def _band(self, tile: tuple[int, ...]) -> tuple[int, int, int, Part]:
        """``(first input row, rows, pad_top, part)`` of the band a run reads."""
        m0, m1 = tile[0], tile[1]
        oy0, oy1 = m0 // self.g.out_w, -(-m1 // self.g.out_w)
        return (*self.g.band(oy0, oy1), self.parts[tuple(tile[:7])])  # type: ignore[index]

    def tile_words(self, name: str, tile: tuple[int, ...]) -> int:
        if name != "a":
            return super().tile_words(name, tile)
        _, rows, _, part = self._band(tile)
        return rows * self.g.conv.w * (part[1] - part[0]) + self.g.extra

    def transfer(self, opcode: int, name: str, tile: tuple[int, ...], buf_addr: int, *, wait_run: bool = False,
                 **kwargs: object) -> Command:
        g = self.g
        if name == "b" and g.kl < g.R:  # a tap's first ``kl`` rows: one DRAM row a tap, R buffer words apart
            k0, k1, n0, n1 = tile[2:6]
            t = self.tensors["b"]
            lanes = narrow_lanes(n1 - n0, g.C, t.elem_bytes, self.W)
            return Command.make(opcode, wait_run=wait_run, buffer=Buffer.WEIGHT, dram_addr=t.base + k0 // g.R * g.kl
                                * t.pitch + n0 * t.elem_bytes, dram_stride=g.kl * t.pitch, rows=(k1 - k0) // g.R,
                                words=g.kl, buf_addr=buf_addr, row_step=g.R, word_step=1,
                                **({"lanes": lanes} if lanes else {}))
        if name == "c" and opcode == Opcode.STORE and self.c_region is None:
            return _one_row(super().transfer(opcode, name, tile, buf_addr, wait_run=wait_run, **kwargs),  # type: ignore[arg-type]
                            self.tensors["c"].pitch, self.W, self.beats)
        if name != "a":
            return super().transfer(opcode, name, tile, buf_addr, wait_run=wait_run, **kwargs)  # type: ignore[arg-type]
        r0, rows, _, (c0, c1, *_) = self._band(tile)
        t, w, ct = self.tensors["a"], self.g.conv.w, c1 - c0
        addr = t.base + r0 * w * t.pitch + c0 * self.g.a_word_bytes
        if self.g.pack:  # a sliding load: the band's pixels and ``extra`` more, one DRAM row
            fields = dict(rows=1, words=rows * w + self.g.extra, dram_stride=t.pitch, row_step=0, slide=1)
        elif ct == self.g.words:  # whole pixels: one DRAM row per input row
            fields = dict(rows=rows, words=w * ct, dram_stride=w * t.pitch, row_step=w * ct)
        else:  # a channel block: one DRAM row per pixel
            fields = dict(rows=rows * w, words=ct, dram_stride=t.pitch, row_step=ct)
        for key in ("rows", "words"):
            if fields[key] >= 1 << 16:
                raise ModelError(f"{self.name}: a band LOAD of {fields[key]} {key} exceeds the 16-bit field")
        return Command.make(opcode, wait_run=wait_run, buffer=Buffer.IFMAP, dram_addr=addr, buf_addr=buf_addr,
                            word_step=1, **fields, **({"lanes": self.g.a_lanes} if self.g.a_lanes else {}))

    def run(self, tile: tuple[int, ...], bases: dict[str, int], *, wait_dma: bool = True) -> Command:
        """The RUN of ``tile`` with ``window``; its WINDOW goes first when it differs from the last one
        or the RUN starts a new queue-load (the window registers are cleared at each START)."""
        _, rows, pad_top, (c0, c1, ky0, _, kx0, kx1) = self._band(tile)
        cv, T = self.g.conv, self.g.T
        image_rows = self.g.image_rows(tile[0] // self.g.out_w, -(-tile[1] // self.g.out_w))
        dw = T if self.g.pack else cv.dilation_w  # packed: kx counts groups of T taps
        # on chip (``a_region``): the whole NHWC input, every channel word of a pixel (network links)
        cw = self.g.words if self.a_region is not None else c1 - c0
        window = ConvWindow(in_w=cv.w, in_h=cv.h if image_rows else rows, out_w=self.g.out_w, stride_h=cv.stride_h,
                            stride_w=cv.stride_w, dilation_h=cv.dilation_h, dilation_w=dw, kw=kx1 - kx0,
                            pad_top=pad_top - ky0 * cv.dilation_h, pad_left=cv.pad_w - kx0 * dw,
                            cw=cw, cblocks=c1 - c0, image_rows=image_rows, pack=self.g.pack)
        while window != self.window or len(self.out) // self.queue_depth != self.window_load:
            self.window, self.window_load = window, len(self.out) // self.queue_depth
            self.add(window.command(what=self.name))
        m0, m1, k0, k1, n0, n1, acc = tile
        x_base = bases.get("a", 0)
        if self.a_region is not None:  # the band inside the whole input: its first row, channel word c0
            x_base = self.a_region + self._band(tile)[0] * cv.w * cw + c0
        return Command.make(Opcode.RUN, wait_dma=wait_dma, m=m1 - m0, k=k1 - k0, n=n1 - n0, accumulate=int(acc),
                            x_base=x_base, y_base=bases["b"], o_base=bases["c"], window=1)

    def store(self, tile: tuple[int, ...], base: int, requant: bool, *, wait_run: bool,
              part: tuple[int, int] | None = None) -> Command:
        """The STORE of the output tile, or with ``c_region`` its MOVE into the ifmap as the next
        conv's whole NHWC input: pixel ``m``'s channel word ``f`` at ``c_region + m * words + f``."""
        if self.c_region is None:
            return super().store(tile, base, requant, wait_run=wait_run, part=part)
        store = self.transfer(Opcode.STORE, "c", tile, base, wait_run=wait_run, requant=requant,
                              q_base=tile[4] // self.g.C, part=part)
        words = -(-self.g.N // self.g.C)
        r0 = part[0] if part is not None else 0
        return Command.make(Opcode.MOVE, wait_run=wait_run, rows=store["rows"], words=store["words"],
                            buf_addr=store["buf_addr"], row_step=store["row_step"], word_step=store["word_step"],
                            q_base=store["q_base"], q_by_row=0,
                            dst_addr=self.c_region + (tile[0] + r0) * words + tile[4] // self.g.C,
                            dst_row_step=words, dst_word_step=1)


def _one_row(store: Command, pitch: int, W: int, beats: dict[str, int]) -> Command:
    """``store`` as one DRAM row of its words when its rows are one word each and back to back in
    DRAM (an output of at most ``C`` channels, ``pitch`` the word's bytes): long bursts instead of a
    burst a pixel, whose write latency would bound the store (``perf_model.dma_timing``). The words
    keep their buffer order (``word_step`` = the rows' step) and their one parameter word
    (``q_by_row``: the row index, 0, picks ``q_base``, the word index would advance it)."""
    rows = store["rows"]
    if rows < 2 or store["words"] != 1 or store["q_by_row"] or transfer_word_beats(store, beats, W) * W != pitch:
        return store
    fields = {**dict(store.fields), "rows": 1, "words": rows, "word_step": store["row_step"], "q_by_row": 1}
    return Command.make(store.opcode, wait_run=store.wait_run, **fields)


def _place(b: _ConvBuilder, runs: list[Tile], room: tuple[int, int, int], half: tuple[int, int, int]
           ) -> list[tuple[dict[str, int], list[tuple[str, int]]]]:
    """Per run: the buffer base of each operand's tile and the loads it needs (a tile goes to the
    half its predecessor in that buffer did not use; a band is kept while the next run reads the
    same band and channel words; no band with the input on chip, ``a_region``). A weight tile is
    loaded only when neither half holds it: the other half still holds the tile before the last,
    so a filter tile of two runs (two tap or channel tiles) stays in the buffer across the output
    tiles (``conv_schedule._loaded``, ``conv_search``'s bytes). Single buffered, both "halves" are
    the buffer's one tile at word 0: only the last tile is held."""
    held: dict[str, object] = {"a": None, "b": None, "c": None}
    other: dict[str, object] = {"a": None, "b": None, "c": None}  # what the other half holds
    side = {"a": 1, "b": 1, "c": 1}
    out = []
    for tile in runs:
        m0, m1, k0, k1, n0, n1, _ = tile
        keys = {"a": (m0, m1, b.parts[tile][:2]), "b": (k0, k1, n0, n1), "c": (m0, m1, n0, n1)}
        bases, loads = {}, []
        for i, name in enumerate(("a", "b", "c")):
            if name == "a" and b.a_region is not None:
                continue
            if held[name] != keys[name]:
                side[name] ^= 1
                kept = name == "b" and other[name] == keys[name] and half[i] > 0  # no other half single buffered
                other[name], held[name] = held[name], keys[name]
                if name != "c" and not kept:
                    loads.append((name, side[name] * half[i]))
            words = b.tile_words(name, tile)
            if words > room[i]:
                raise ModelError(f"{b.name}: a tile of {name.upper()} needs {words} buffer words, more than the "
                                 f"{room[i]} it may use")
            bases[name] = side[name] * half[i]
        out.append((bases, loads))
    return out


def compile_conv(config: ArrayConfig, conv: Conv2d, *, requant: bool = False, queue_depth: int = QUEUE_DEPTH,
                 tiling: ConvTiling | None = None, a_region: int | None = None, c_region: int | None = None,
                 ifmap_words: int | None = None, pack: bool = True) -> ConvProgram:
    """The program of one image of ``conv`` on ``config`` (module docstring); ``tiling`` replaces
    the search's (tests: tap tiles on a small array); ``pack=False`` keeps one tap a word where tap
    packing would apply (``conv_pack``), e.g. to compare the two programs.

    Network links (``perf_model.compiler.conv_network``): ``a_region``, the ifmap word where the
    whole NHWC input already is (``words`` channel words a pixel, pixels in order; no band is
    loaded, each RUN reads its band in place); ``c_region``, where the output goes in that layout
    (each STORE a ``MOVE``, requantised only); ``ifmap_words``, the ifmap words the bands may use.

    Raises:
        ModelError: the design does not build windows (not WS), the conv is infeasible (the
            tiling's reason), a window field or a transfer does not fit its encoding, or a
            requantised op has more than :data:`QPARAM_CHANNELS` channels.
    """
    g, tiling = conv_geometry_for(config, conv, requant=requant, tiling=tiling, a_region=a_region,
                                  ifmap_words=ifmap_words, pack=pack)
    pairs = list(g.tiles(tiling))
    runs = [t for t, _ in pairs]
    parts = dict(pairs)
    W = axi_data_bytes(config)
    tensors, base = conv_tensors(g, len(runs), max(t[3] for t in runs), requant)
    what = conv.name or "conv"
    check_regions(W, queue_depth, requant, c_region)
    b = _ConvBuilder(g, tensors, W, parts, what, queue_depth, a_region, c_region)
    if requant:
        b.add(qparam_load(tensors, g.C))
    room = conv_room(config, ifmap_words)
    half = tuple(r if config.double_buffered else 0 for r in room)
    placed = _place(b, runs, room, half)  # type: ignore[arg-type]
    (_double if config.double_buffered else _single)(b, runs, placed, requant)  # type: ignore[arg-type]
    total = len(b.out)
    chunks = tuple((i, min(i + queue_depth, total)) for i in range(0, total, queue_depth))
    return ConvProgram(tuple(b.out), tensors, 0, base, W, requant, tuple(runs), chunks, tiling,
                       tuple(parts[t] for t in runs), g.kl if g.kl < g.R else 0, g.pack)


def conv_geometry_for(config: ArrayConfig, conv: Conv2d, *, requant: bool, tiling: ConvTiling | None,
                      a_region: int | None, ifmap_words: int | None, pack: bool) -> tuple[_Geometry, ConvTiling]:
    """The geometry and the tiling ``compile_conv`` builds ``conv``'s program on (its arguments), or
    the ``ModelError`` it raises first: a design that builds no windows, no tiling that fits, a
    requantised op of more channels than the output stage's parameters."""
    pack, tiling = conv_tiling_for(config, conv, requant=requant, tiling=tiling, a_region=a_region,
                                   ifmap_words=ifmap_words, pack=pack)
    return _Geometry(config, conv, pack=pack), tiling


def conv_tiling_for(config: ArrayConfig, conv: Conv2d, *, requant: bool, tiling: ConvTiling | None,
                    a_region: int | None, ifmap_words: int | None, pack: bool) -> tuple[bool, ConvTiling]:
    """:func:`conv_geometry_for` without the geometry: whether the window packs taps, and the tiling."""
    why = conv_served(config)
    if why:
        raise ModelError(f"design {config.short_name()}: {why}")
    # An input already on chip (``a_region``) is pixel-major, one pixel a word: no sliding words
    # to read, so its window takes one tap a word (tap packing needs the band's sliding LOAD).
    pack = pack and a_region is None
    if tiling is None:
        tiling = conv_tiling(config, conv, requant=requant, ifmap_words=ifmap_words, pack=pack)
    if not tiling.feasible:
        raise ModelError(f"design {config.short_name()} cannot run the conv on chip: {tiling.reason}")
    if requant and conv.c_out > QPARAM_CHANNELS:
        raise ModelError(f"a requantised op has at most {QPARAM_CHANNELS} output channels, not {conv.c_out}")
    return pack, tiling


def conv_tensors(g: _Geometry, runs: int, k_rows: int, requant: bool) -> tuple[dict[str, TensorLayout], int]:
    """The DRAM layout of a conv program of ``runs`` runs whose weight rows end at ``k_rows`` (module
    docstring: every tensor on a page after the program), and the end of its last tensor."""
    config, conv = g.config, g.conv
    ib = config.input_bits // 8
    base = _align((2 + 6 * runs) * COMMAND_BYTES, PAGE)
    tensors: dict[str, TensorLayout] = {}
    out_b = ib if requant else (4 if config.acc_bits <= 32 else 8)
    # ``a`` has ``extra`` pixels of slack after the images: a packed band's load reads them.
    specs = {"a": (conv.n * conv.h * conv.w + g.extra, g.a_pitch // ib, ib, (conv.n * conv.h * conv.w, conv.c_in)),
             "b": (k_rows // g.R * g.kl, g.row_bytes(g.N, ib) // ib, ib, (k_rows // g.R * g.kl, g.N)),
             "c": (g.M, g.row_bytes(g.N, out_b) // out_b, out_b, (g.M, g.N))}
    for name, (rows, row_elems, elem, shape) in specs.items():
        tensors[name] = TensorLayout(name, base, rows, row_elems, elem, False, shape)
        base = _align(base + tensors[name].nbytes, PAGE)
    if requant:
        tensors["q"] = TensorLayout("q", base, 1, _align(g.N, g.C), 16, False, (1, g.N))
        base = _align(base + tensors["q"].nbytes, PAGE)
    return tensors, base


def conv_room(config: ArrayConfig, ifmap_words: int | None) -> tuple[int, int, int]:
    """Words an ifmap, weight and ofmap tile may take (half a buffer double buffered); the bands'
    ``ifmap_words`` in place of the ifmap's (``compile_conv``)."""
    room = _room(config)
    if ifmap_words is not None:
        room = (ifmap_words // 2 if config.double_buffered else ifmap_words, *room[1:])
    return room


def check_regions(W: int, queue_depth: int, requant: bool, c_region: int | None) -> None:
    """``compile_conv``'s ``ModelError`` for a queue depth of no whole queue entries, or an output
    kept on chip (``c_region``) that is not requantised."""
    if queue_depth < 1 or queue_depth % queue_entry_commands(W):
        raise ModelError(f"queue_depth must be a positive multiple of {queue_entry_commands(W)} commands, "
                         f"not {queue_depth}")
    if c_region is not None and not requant:
        raise ModelError("only a requantised output can stay on chip (c_region needs requant)")


def qparam_load(tensors: dict[str, TensorLayout], C: int) -> Command:
    """The ``LOAD`` of the output stage's parameters that opens a requantised conv's program."""
    qt = tensors["q"]
    return Command.make(Opcode.LOAD, buffer=Buffer.QPARAM, dram_addr=qt.base, dram_stride=qt.pitch, rows=1,
                        words=qt.row_elems // C, buf_addr=0, row_step=0, word_step=1)


def conv_weight_matrix(conv: Conv2d, program: ConvProgram, rows: int, weights: np.ndarray) -> np.ndarray:
    """The ``b`` matrix of ``program`` from HWIO ``weights`` (``kh x kw x c_in/groups x c_out``)
    on an array of ``rows`` rows (module docstring)."""
    w = np.asarray(weights)
    want = (conv.kh, conv.kw, conv.c_in // conv.groups, conv.c_out)
    if w.shape != want:
        raise ValueError(f"conv weights must have shape {want}, not {w.shape}")
    cpg, cpo = conv.c_in // conv.groups, conv.c_out // conv.groups
    R = rows
    if program.pack:
        return _packed_weight_matrix(program, R, w)
    kl = program.k_lanes or R  # rows of a channel word in ``b`` (the first ``kl`` lanes')
    out = np.zeros(program.tensors["b"].shape, dtype=np.int64)
    for (k0, k1, n0, n1), (c0, c1, ky0, ky1, kx0, kx1) in _weight_tiles(program):
        chans = np.arange(c0 * R, c1 * R) if kl == R else np.arange(kl)  # one tap's rows: channel word, lane
        ns = np.arange(n0, n1)
        group = ns // cpo
        inside = (chans[:, None] >= group[None, :] * cpg) & (chans[:, None] < (group[None, :] + 1) * cpg)
        local = np.clip(chans[:, None] - group[None, :] * cpg, 0, cpg - 1)
        at = k0 // R * kl
        for ky in range(ky0, ky1):
            for kx in range(kx0, kx1):
                out[at:at + len(chans), n0:n1] = np.where(inside, w[ky, kx][local, ns[None, :]], 0)
                at += len(chans)
        if at != k1 // R * kl:
            raise ModelError(f"a run of {k1 - k0} weight rows reads {at - k0 // R * kl} (its taps and channel words)")
    return out


def _weight_tiles(program: ConvProgram) -> Iterator[tuple[tuple[int, int, int, int], tuple[int, ...]]]:
    """Each weight tile of ``program`` once, in run order: its ``(k0, k1, n0, n1)`` rows and filters
    of ``b`` and the part (channel words, kernel rows, taps) its first run reads."""
    done = set()
    for tile, part in zip(program.runs, program.parts, strict=True):
        k0, k1, n0, n1 = tile[2:6]
        if (k0, n0, n1) not in done:
            done.add((k0, n0, n1))
            yield (k0, k1, n0, n1), part


def _packed_weight_matrix(program: ConvProgram, R: int, w: np.ndarray) -> np.ndarray:
    """The ``b`` matrix of a tap-packed ``program`` (``conv_pack.packed_weights``, in run order:
    per run, per kernel row of its tap tile, per group of ``T`` taps, ``R`` rows)."""
    kh, kw, c_in, _ = w.shape
    T = 1 << program.pack
    per_fold = packed_weights(w, T, R // T, R)  # (kh * groups, R, c_out)
    groups = -(-kw // T)
    out = np.zeros(program.tensors["b"].shape, dtype=np.int64)
    for (k0, k1, n0, n1), (_, _, ky0, ky1, kx0, kx1) in _weight_tiles(program):
        at = k0
        for ky in range(ky0, ky1):
            for g in range(kx0, kx1):
                out[at:at + R, n0:n1] = per_fold[ky * groups + g][:, n0:n1]
                at += R
        if at != k1:
            raise ModelError(f"a packed run of {k1 - k0} weight rows reads {at - k0} (its taps)")
    return out
