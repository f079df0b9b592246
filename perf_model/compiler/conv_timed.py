"""A conv's program for its figures: ``compile_conv``'s commands in order, each as its timing.

``perf_model.compiler.conv_network`` builds a network's one program from each conv's program and
walks it (``program_timing``). A sweep walks that program for every design it scores, and making
each command (its fields, bounds and encoding) is most of the cost. :func:`timed_conv` gives
the same program with each ``LOAD``, ``RUN``, ``STORE`` and ``MOVE`` of the runs as a
:class:`~perf_model.program_timing.TimedCommand`: its opcode, wait bits and window flag as
``compile_conv`` sets them, the cycles its unit is busy and the DRAM bytes it moves, from the
runs as arrays (``conv_schedule.RunArrays``, the schedule the RTL's counters are checked
against). The ``WINDOW`` commands and the output stage's parameter load are the compiler's own.
The network places, splits into queue-loads and walks that list as it does the compiled one, so
its walk gives the same cycles and bytes: ``tests/perf_model/test_model_conv_timed.py`` holds
them equal, command by command and network by network, on random designs.

Each timed transfer carries its cycles at an unpaced DRAM and its geometry (address modulo a
page, stride, rows, words, beats a word): on a paced DRAM (``dram_rate``) the walk times it from
that geometry when it starts, as it times a compiled transfer. A timed program is made only
where every field of the program fits its encoding without a check (the
program's DRAM bytes within 32 bits, every transfer's rows and words within 16, every tile within
its buffer's room): elsewhere it is ``compile_conv``'s program itself, which raises what the
compiler raises. A timed program is never encoded: ``simulate`` and ``export`` compile.
"""

from __future__ import annotations

import functools

import numpy as np

from accel_spec.config import ArrayConfig
from accel_spec.isa import QUEUE_DEPTH, Buffer, Command, Opcode, move_cycles
from perf_model.compiler.conv import (
    ConvProgram,
    ConvTiling,
    check_regions,
    compile_conv,
    conv_room,
    conv_tensors,
    conv_tiling_for,
    qparam_load,
)
from perf_model.compiler.conv_geometry import _Geometry
from perf_model.compiler.conv_schedule import RunArrays, transfer_tuples
from perf_model.compiler.conv_search import shape_key
from perf_model.compiler.conv_window import ConvWindow
from perf_model.program_timing import BUFFER_FIELDS, TimedCommand, axi_data_bytes, program_fields
from workloads.ops import Conv2d

__all__ = ["timed_conv", "unbuffered_key"]

#: The fields a conv's figures read of a timed transfer (``conv_score.program_bytes``): its buffer.
_IFMAP, _WEIGHT, _OFMAP = ({"buffer": int(b)} for b in (Buffer.IFMAP, Buffer.WEIGHT, Buffer.OFMAP))
_FIELD = 1 << 16  # a transfer's ``rows`` and ``words`` stay below (16-bit fields)
_ADDRESS = 1 << 32  # a DRAM address stays below


def timed_conv(config: ArrayConfig, conv: Conv2d, *, requant: bool = False, tiling: ConvTiling | None = None,
               a_region: int | None = None, c_region: int | None = None, ifmap_words: int | None = None,
               queue_depth: int = QUEUE_DEPTH) -> ConvProgram:
    """``compile_conv(config, conv, ...)`` with the runs' commands timed (module docstring): the same
    tensors, tiling, command count and queue-loads; ``runs`` and ``parts`` left empty.

    Raises:
        ModelError: what ``compile_conv`` raises (a design without windows, no tiling that fits, a
            window field past its encoding, ...).
    """
    compiled = functools.partial(compile_conv, config, conv, requant=requant, queue_depth=queue_depth,
                                 a_region=a_region, c_region=c_region, ifmap_words=ifmap_words)
    pack, tiling = conv_tiling_for(config, conv, requant=requant, tiling=tiling, a_region=a_region,
                                   ifmap_words=ifmap_words, pack=True)
    check_regions(axi_data_bytes(config), queue_depth, requant, c_region)
    # the conv's shape: its name shows only in an error (not kept), its requantisation's values nowhere
    key = (unbuffered_key(config), shape_key(conv), requant, tiling, a_region is None, c_region is None, queue_depth)
    made = _MADE.get(key)
    if made is None:
        if len(_MADE) >= _MADE_SIZE:
            _MADE.clear()
        made = _MADE[key] = _made(_Geometry(config, conv, pack=pack), tiling, requant, a_region is not None,
                                  c_region is not None, queue_depth)
    program, need = made
    room = conv_room(config, ifmap_words)
    if program is None or any(n > r for n, r in zip(need, room, strict=True)):
        return compiled(tiling=tiling)
    return program


#: Timed programs by what they see of the design (not its buffer sizes: those only pick the tiling,
#: given in the key, and bound the tiles, checked per design against the words each tile needs).
_MADE: dict[tuple[object, ...], tuple[ConvProgram | None, tuple[int, int, int]]] = {}
_MADE_SIZE = 1 << 10  # a ResNet-18 conv program is some 400 commands of ~100 bytes: ~40 MB at most
_KEYS: dict[ArrayConfig, tuple[object, ...]] = {}


def unbuffered_key(config: ArrayConfig) -> tuple[object, ...]:
    """``conv_score.design_key`` of ``config`` without its buffer sizes: ``program_fields(config,
    BUFFER_FIELDS)``, kept per design."""
    key = _KEYS.get(config)
    if key is None:
        if len(_KEYS) >= _MADE_SIZE:
            _KEYS.clear()
        key = _KEYS[config] = program_fields(config, BUFFER_FIELDS)
    return key


def _made(g: _Geometry, tiling: ConvTiling, requant: bool, in_place: bool, moved: bool, depth: int
          ) -> tuple[ConvProgram | None, tuple[int, int, int]]:
    """The timed program (``None`` where a field would not fit its encoding) and the words its largest
    ifmap, weight and ofmap tiles take (0 for the ifmap when its input is on chip)."""
    r = RunArrays(g, tiling, requant, bands=not in_place)
    tensors, end = conv_tensors(g, r.runs, int((r.k0 + r.K).max()), requant)
    need = (0 if in_place else int((r.b_rows[r.mi] * g.conv.w * (r.c1 - r.c0) + g.extra).max()),
            int((r.K * r.cwords).max()), int((r.p * r.cwords).max()))
    if not _encodes(r, g, end, not in_place):
        return None, need
    head = [qparam_load(tensors, g.C)] if requant else []
    out = _commands(r, g, head, in_place, moved, depth, g.conv.name or "conv")
    chunks = tuple((i, min(i + depth, len(out))) for i in range(0, len(out), depth))
    return ConvProgram(tuple(out), tensors, 0, end, r.W, requant, (), chunks, tiling, (),  # type: ignore[arg-type]
                       g.kl if g.kl < g.R else 0, g.pack), need


def _encodes(r: RunArrays, g: _Geometry, end: int, bands: bool) -> bool:
    """Whether every field of the program fits its encoding, as ``compile_conv`` would find (else it
    raises, and the caller compiles to raise the same)."""
    if end >= _ADDRESS:
        return False
    mi, w = r.mi, g.conv.w
    rows, ct = r.b_rows[mi], r.c1 - r.c0
    if bands:
        loaded = r.new_band
        if g.pack:
            sizes = [rows * w + g.extra]
        elif bool((ct == g.words).all()):
            sizes = [rows, w * ct]
        else:
            sizes = [np.where(ct == g.words, rows, rows * w), np.where(ct == g.words, w * ct, ct)]
        if any(int(s[loaded].max(initial=0)) >= _FIELD for s in sizes):
            return False
    weight_rows = r.K // g.R if g.kl < g.R else r.K
    # every store, MOVE or part of one moves at most its output tile's pixels (rows, or words of one row)
    return int(weight_rows[r.new_w].max(initial=0)) < _FIELD and int(r.p.max()) < _FIELD and \
        int(r.cwords.max()) < _FIELD


def _window(r: RunArrays, g: _Geometry, i: int, in_place: bool) -> ConvWindow:
    """Run ``i``'s window (``conv._ConvBuilder.run``)."""
    cv, m = g.conv, int(r.mi[i])
    ky0, _, kx0, kx1 = r.taps[int(r.tp[i])]
    image_rows = int(r.b_img[m])
    dw = g.T if g.pack else cv.dilation_w
    c0, c1 = int(r.c0[i]), int(r.c1[i])
    return ConvWindow(in_w=cv.w, in_h=cv.h if image_rows else int(r.b_rows[m]), out_w=g.out_w,
                      stride_h=cv.stride_h, stride_w=cv.stride_w, dilation_h=cv.dilation_h, dilation_w=dw,
                      kw=kx1 - kx0, pad_top=int(r.b_pad[m]) - ky0 * cv.dilation_h, pad_left=cv.pad_w - kx0 * dw,
                      cw=g.words if in_place else c1 - c0, cblocks=c1 - c0, image_rows=image_rows, pack=g.pack)


def _commands(r: RunArrays, g: _Geometry, head: list[Command], in_place: bool, moved: bool, depth: int,
              what: str) -> list[Command | TimedCommand]:
    """The program's commands in ``compile_conv``'s order (``program._single``/``_double``), the runs'
    transfers and RUNs timed."""
    out: list[Command | TimedCommand] = list(head)
    runs, double = r.runs, g.config.double_buffered
    cyc, new_band, new_w, new_win = r.cyc.tolist(), r.new_band.tolist(), r.new_w.tolist(), r.new_win.tolist()
    band_n, w_n = r.band_n.tolist(), r.w_n.tolist()
    band_bytes, w_bytes = r.band_bytes.tolist(), r.w_bytes.tolist()
    store_op = Opcode.MOVE if moved else Opcode.STORE

    def outputs(i: np.ndarray, r0: np.ndarray, r1: np.ndarray
                ) -> tuple[list[int], list[int], list[tuple[bool, bool, int, int, int, int, int] | None]]:
        """Cycles, DRAM bytes written and transfers of the stores (or MOVEs) of rows ``r0 .. r1 - 1``
        of run ``i``'s tile."""
        if moved:
            return [move_cycles(a, b) for a, b in zip((r1 - r0).tolist(), r.cwords[i].tolist(), strict=True)], \
                [0] * len(i), [None] * len(i)
        stores = r.store_transfers(i, r0, r1)
        return r.xf.many(r.skind, *stores).tolist(), r.store_bytes(i, r0, r1).tolist(), \
            [(False, r.requant, *x) for x in transfer_tuples(*stores)]

    T, LOAD, RUN = TimedCommand, Opcode.LOAD, Opcode.RUN
    wait = 0 if double else 1
    band = [T(LOAD, band_n[i], 0, wait, 0, 0, band_bytes[i], 0, _IFMAP, (True, False, *r.band_geometry[i]))
            if new_band[i] else None for i in range(runs)]
    weight = [T(LOAD, w_n[i], 0, wait, 0, 0, w_bytes[i], 0, _WEIGHT, (True, False, *r.w_geometry[i]))
              if new_w[i] else None for i in range(runs)]
    # equal RUNs one object (a timed command is never changed): a conv's runs are few distinct tiles
    made_runs: dict[tuple[int, int, int, int, bool], TimedCommand] = {}
    run = [made_runs.get(x) or made_runs.setdefault(x, T(RUN, x[0], 1, 0, 0, 1, 0, 0, {
        "m": x[1], "k": x[2], "n": x[3], "accumulate": int(x[4])}))
        for x in zip(cyc, r.p.tolist(), r.K.tolist(), r.fn.tolist(), (r.k0 > 0).tolist(), strict=True)]
    stored = None if moved else _OFMAP
    # each distinct window once, equal windows one object (compared by identity), with its command
    windows: dict[tuple[int, int, int, int], tuple[ConvWindow, Command]] = {}
    commands: dict[ConvWindow, tuple[ConvWindow, Command]] = {}
    mi, tp, c0, c1 = r.mi.tolist(), r.tp.tolist(), r.c0.tolist(), r.c1.tolist()
    after: list[list[TimedCommand]] = [[] for _ in range(runs)]  # what follows each RUN
    if double:
        has, prev, r0, r1 = r.pieces()
        at = np.flatnonzero(has)
        for i, n, w, x in zip(at.tolist(), *outputs(prev[at], r0[at], r1[at]), strict=True):
            after[i].append(T(store_op, n, 0, 0, 0, 0, 0, w, stored, x))
        for i in range(runs - 1):
            after[i] += [c for c in (band[i + 1], weight[i + 1]) if c is not None]
        last = np.array([runs - 1])
        (final,), (final_w,), (final_x,) = outputs(last, np.zeros(1, dtype=np.int64), r.m_pix[r.mi[last]])
        after[-1].append(T(store_op, final, 0, 1, 0, 0, 0, final_w, stored, final_x))
        out += [c for c in (band[0], weight[0]) if c is not None]
    else:
        ends = np.flatnonzero(r.last_out)
        for i, n, w, x in zip(ends.tolist(), *outputs(ends, np.zeros(len(ends), dtype=np.int64),
                                                       r.m_pix[r.mi[ends]]), strict=True):
            after[i].append(T(store_op, n, 0, 1, 0, 0, 0, w, stored, x))
    held: ConvWindow | None = None
    held_load = -1
    window: ConvWindow | None = None
    command: Command | None = None
    before = [[c for c in (band[i], weight[i]) if c is not None] for i in range(runs)] if not double else []
    for i in range(runs):
        if not double:
            out += before[i]
        if new_win[i] or window is None:
            key = (mi[i], tp[i], c0[i], c1[i])
            got = windows.get(key)
            if got is None:
                made = _window(r, g, i, in_place)
                got = windows[key] = commands.setdefault(made, (made, made.command(what=what)))
            window, command = got
        while window is not held or len(out) // depth != held_load:
            held, held_load = window, len(out) // depth
            out.append(command)  # type: ignore[arg-type]  # set with window
        out.append(run[i])
        out += after[i]
    return out
