"""The figures of a conv on chip (all its images), from its program (the evaluator's conv scorer).

``perf_model.evaluator.conv_ops`` puts these in place of the host's im2col GEMM for every conv a
design runs on chip; callers pass :func:`conv_figures` to it (``perf_model.compiler.scorers``). The
figures are the program's own: ``compile_conv`` with the tiling its search picks, the walk's
cycles (``gemm_program_cycles`` at the design's DRAM pacing, as ``simulate`` expects them) and
the bytes of its transfers, counted by runs without the program (``conv_schedule``, equal to
the walk) unless the DRAM is paced (then the program is compiled and walked). A sweep meets a
design once per conv, so they are cached.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import Buffer, Opcode
from perf_model.compiler.conv import ConvProgram, ConvTiling, compile_conv, conv_served, conv_tiling
from perf_model.compiler.conv_batch import batch_schedules
from perf_model.compiler.conv_forms import candidates, describe, form_conv, host_writes
from perf_model.compiler.conv_geometry import _Geometry
from perf_model.compiler.conv_schedule import ConvSchedule, conv_schedule
from perf_model.compiler.conv_search import _bus, shape_key
from perf_model.compiler.conv_timed import timed_conv
from perf_model.evaluator.conv_ops import ConvFigures
from perf_model.program_timing import (
    TimedCommand,
    dram_rate,
    gemm_program_cycles,
    program_fields,
    transfer_bytes,
    word_beats,
)
from workloads.ops import Conv2d

__all__ = ["conv_figures", "conv_form", "conv_steps", "design_key", "program_bytes", "run_figures", "tiling_figures",
           "tilings_figures", "walked_figures"]


def program_bytes(config: ArrayConfig, program: ConvProgram) -> tuple[int, int, int]:
    """DRAM bytes ``(ifmap read, weights read, output written)`` of a program's transfers (narrow ones at
    their real size; the output stage's parameters and the fetch excluded, as the model counts a
    GEMM's); a timed program's (``conv_timed``) from its commands' bytes."""
    beats, W = word_beats(config), program.data_bytes
    out = [0, 0, 0]
    for c in program.commands:
        if (c.opcode == Opcode.LOAD and c["buffer"] in (Buffer.IFMAP, Buffer.WEIGHT)) or (
                c.opcode == Opcode.STORE and c["buffer"] == Buffer.OFMAP):
            moved = (c.read + c.written) if type(c) is TimedCommand else transfer_bytes(c, beats, W)
            out[int(c["buffer"])] += moved
    return out[0], out[1], out[2]


def conv_figures(config: ArrayConfig, conv: Conv2d, requant: bool) -> ConvFigures | str:
    """``conv`` (all its images, one program) on ``config``, or the reason the design builds no windows.

    Every form of ``conv`` worth scoring (``conv_forms.candidates``: as it is, over its
    space-to-depth input, with its kernel rows stacked, both; a reshaped pixel must fit one ifmap
    word) is scored; the figures are those of the form with fewer total cycles (then fewer DRAM
    bytes), its ``steps`` and ``form`` (in words) naming the reshapes when one won (:func:`conv_form`
    gives the conv that program runs).
    """
    why = conv_served(config)
    if why:
        return why
    key = (design_key(config), conv, requant)
    figures = _CACHE.get(key)
    if figures is None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        figures = _figures(config, conv, requant)
        for steps, reshaped in candidates(conv, config.rows)[1:]:
            other = _figures(config, reshaped, requant)
            if other.feasible and (not figures.feasible or _rank(other) < _rank(figures)):
                figures = dataclasses.replace(other, form=describe(conv, steps), steps=steps,
                                              host_writes=host_writes(conv, steps))
        _CACHE[key] = figures
    return figures


def conv_steps(config: ArrayConfig, conv: Conv2d, requant: bool) -> tuple[str, ...]:
    """The reshapes (``conv_forms``) of the form :func:`conv_figures` keeps, ``()`` for none."""
    figures = conv_figures(config, conv, requant)
    return figures.steps if isinstance(figures, ConvFigures) else ()


def conv_form(config: ArrayConfig, conv: Conv2d, requant: bool) -> Conv2d:
    """The conv the program :func:`conv_figures` scores runs: ``conv``, or its reshaped form."""
    steps = conv_steps(config, conv, requant)
    return form_conv(conv, steps) if steps else conv


def _rank(figures: ConvFigures) -> tuple[int, float]:
    return figures.total, sum(figures.read) + sum(figures.write)


def design_key(config: ArrayConfig) -> tuple[object, ...]:
    """What a conv program and its walk see of ``config``: every field but those it sees through
    the DRAM pacing only (the node, the clock and the DRAM part), and that pacing, so designs of a
    sweep that differ elsewhere share figures. Kept per design (its ops reuse it)."""
    design = _DESIGN_KEYS.get(config)
    if design is None:
        if len(_DESIGN_KEYS) >= _CACHE_SIZE:
            _DESIGN_KEYS.clear()
        design = _DESIGN_KEYS[config] = (program_fields(config), dram_rate(config))
    return design


_CACHE: dict[tuple[object, ...], ConvFigures] = {}
_DESIGN_KEYS: dict[ArrayConfig, tuple[object, ...]] = {}
#: The schedule of a tiling, per the design fields it sees (designs that differ in their buffers
#: only often pick the same tiling).
_SCHEDULES: dict[tuple[object, ...], ConvSchedule | None] = {}
_CACHE_SIZE = 1 << 14


def _figures(config: ArrayConfig, conv: Conv2d, requant: bool) -> ConvFigures:
    tiling = conv_tiling(config, conv, requant=requant)
    if not tiling.feasible:
        return ConvFigures(False, tiling.reason)
    return tiling_figures(config, conv, requant, tiling)


def tiling_figures(config: ArrayConfig, conv: Conv2d, requant: bool, tiling: ConvTiling) -> ConvFigures:
    """The figures of ``conv`` run with the feasible ``tiling`` on ``config`` (counted by runs,
    ``conv_schedule``; walked on a paced DRAM). They depend on the design through the fields of the
    schedule's key only (not the buffer sizes, which chose the tiling)."""
    key = _schedule_key(config, conv, requant, tiling)
    fast = _SCHEDULES.get(key)
    if fast is None:
        if len(_SCHEDULES) >= _CACHE_SIZE:
            _SCHEDULES.clear()
        fast = _SCHEDULES[key] = conv_schedule(_Geometry(config, conv), tiling, requant)
    return _scheduled(config, conv, requant, tiling, fast)


def tilings_figures(items: Sequence[tuple[ArrayConfig, Conv2d, bool, ConvTiling]]) -> list[ConvFigures]:
    """:func:`tiling_figures` of every ``(config, conv, requant, tiling)``: the schedules not kept yet
    on unpaced designs counted in one batch (``conv_batch.batch_schedules``)."""
    keys = [_schedule_key(*item) for item in items]
    fresh: dict[tuple[object, ...], int] = {}
    for i, key in enumerate(keys):
        if key not in _SCHEDULES and key not in fresh and key[8] is None:  # (key[8]: the DRAM pacing)
            fresh[key] = i
    if len(_SCHEDULES) + len(fresh) >= _CACHE_SIZE:
        _SCHEDULES.clear()
    batch = [(_Geometry(items[i][0], items[i][1]), items[i][3], items[i][2]) for i in fresh.values()]
    _SCHEDULES.update(zip(fresh, batch_schedules(batch), strict=True))
    return [_scheduled(*item, _SCHEDULES[key]) if key in _SCHEDULES else tiling_figures(*item)
            for item, key in zip(items, keys, strict=True)]


def _schedule_key(config: ArrayConfig, conv: Conv2d, requant: bool, tiling: ConvTiling) -> tuple[object, ...]:
    """What a tiling's schedule sees of the design, the conv and requant (:data:`_SCHEDULES`' key)."""
    W, rate = _bus(config)
    return (tiling, config.rows, config.cols, config.input_bits, config.acc_bits,
            config.double_buffered, config.shadow_stationary, W, rate, shape_key(conv), requant)


def _scheduled(config: ArrayConfig, conv: Conv2d, requant: bool, tiling: ConvTiling,
               fast: ConvSchedule | None) -> ConvFigures:
    """The figures from the schedule ``fast``, or (``None``: a paced DRAM) from the timed program's walk."""
    if fast is not None:  # the walk's figures, counted by runs (``conv_schedule``)
        return ConvFigures(True, "", compute=fast.compute, total=fast.total, folds=fast.folds,
                           read=(float(fast.read[0]), float(fast.read[1]), 0.0), write=(0.0, 0.0, float(fast.written)),
                           sram_read=fast.sram_read, sram_write=fast.sram_write, tile=fast.tile)
    return walked_figures(config, conv, requant, tiling, timed=True)


def walked_figures(config: ArrayConfig, conv: Conv2d, requant: bool, tiling: ConvTiling, *,
                   timed: bool = False) -> ConvFigures:
    """The figures of the conv from its compiled program and the program walk at the design's DRAM
    pacing (the reference :func:`~perf_model.compiler.conv_schedule.conv_schedule` equals; a paced
    DRAM's way); ``timed``: from its timed program (``conv_timed``: the same walk and bytes, each
    transfer timed from its geometry at the pacing)."""
    program = (timed_conv if timed else compile_conv)(config, conv, requant=requant, tiling=tiling)
    walk = gemm_program_cycles(config, program, rate=dram_rate(config))
    held = _COUNTED.get(id(program))
    if held is not None and held[0] is program and held[1] == shape_key(conv):
        (a, b, c), (folds, sram_read, sram_write, tile) = held[2]
    else:
        a, b, c = program_bytes(config, program)
        folds, sram_read, sram_write, tile = run_figures(config, conv, program, float(a), float(b))
        if timed:  # (a timed program is shared by the designs of its array, bus, bits and buffering)
            if len(_COUNTED) >= _CACHE_SIZE:
                _COUNTED.clear()
            _COUNTED[id(program)] = (program, shape_key(conv), ((a, b, c), (folds, sram_read, sram_write, tile)))
    return ConvFigures(True, "", compute=walk.compute, total=walk.total, folds=folds,
                       read=(float(a), float(b), 0.0), write=(0.0, 0.0, float(c)),
                       sram_read=sram_read, sram_write=sram_write, tile=tile)


#: A timed program's bytes and run figures (what its walk at any pacing leaves the same), by the
#: program (held, so its id is not reused) and conv shape.
_RunFigures = tuple[int, tuple[float, float, float], tuple[float, float, float], tuple[int, int, int]]
_COUNTED: dict[int, tuple[ConvProgram, Conv2d, tuple[tuple[int, int, int], _RunFigures]]] = {}


def run_figures(config: ArrayConfig, conv: Conv2d, program: ConvProgram, a_written: float,
                b_written: float) -> tuple[int, tuple[float, float, float], tuple[float, float, float],
                                           tuple[int, int, int]]:
    """``(folds, sram_read, sram_write, tile)`` of a conv program's runs (its RUN commands, compiled or
    timed; per operand A, B, C; ``tile``: the first run's ``(m, k, n)``): every run streams its ``A``
    once per column fold and reads its stationary tile once; each row fold writes the partial sums
    and reads back all but the first; the output is read at ``acc_bits`` to leave.
    ``a_written``/``b_written``: bytes written into the ifmap and the weight buffer (what the
    program's loads, or a MOVE, bring in)."""
    R, C = config.rows, config.cols
    ib, acc = config.input_bits / 8, config.acc_bits / 8
    folds = 0
    sram_a = sram_b = c_write = c_read = 0.0
    first: tuple[int, int, int] | None = None
    for cmd in program.commands:
        if cmd.opcode != Opcode.RUN:
            continue
        m, k, n, accumulate = cmd["m"], cmd["k"], cmd["n"], cmd["accumulate"]
        first = first or (m, k, n)
        rf, cf = math.ceil(k / R), math.ceil(n / C)
        folds += rf * cf
        sram_a += m * k * ib * cf  # streamed once per column fold
        sram_b += k * n * ib  # the stationary tile, once a run
        c_write += m * n * acc * rf  # each row fold writes the partial sums ...
        c_read += m * n * acc * (rf - 1 + accumulate)  # ... and reads back all but the first
    pixels = conv.n * conv.out_h * conv.out_w * conv.c_out  # every image's output
    if first is None:
        raise ModelError(f"{conv.name or 'conv'}: a program without a RUN has no run figures")
    return folds, (sram_a, sram_b, c_read + pixels * acc), (a_written, b_written, c_write), first
