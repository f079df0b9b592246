"""The walk of each vector op's own program, per design, remembered by what it depends on: the
evaluator's :class:`~perf_model.evaluator.vector_walk.VectorWalks` of the compiler (:data:`COMPILER_WALKS`).

A design with the vector unit that runs a workload op by op runs each vector op as a program of
its own (:func:`perf_model.compiler.vector_chunks.vector_op_program`); its cycles and DRAM bytes
are that program's walk (``perf_model.program_timing``). The program and its walk depend on the
design only through :func:`walk_key` (the lanes, the ifmap's words, the bus, the DRAM words'
beats, the element bytes and the DRAM pacing), so a sweep's designs share walks: each ``(key, op)``
is compiled and walked once and kept (the last :data:`_CACHE_SIZE`).

The walk itself is :func:`perf_model.program_timing.gemm_program_cycles`'s: the sum of each
queue-load's independent :func:`~perf_model.program_timing.program_cycles`. A queue-load's walk
reads only its commands, its fetch address and the design's bus, DRAM words' beats, lanes and
pacing (and, for a ``RUN``, the array), and a transfer's bursts depend on its DRAM address and
stride modulo a page (``dma_timing.bursts``), so each queue-load's timing is kept by those
(:func:`_load_key`): the queue-loads of a long chunked program that repeat, and the programs of
designs that differ only in what the program does not depend on (an op that fits whole an ifmap of
any of several sizes), are walked once. :func:`clear_caches` forgets both.
"""

from __future__ import annotations

from collections import OrderedDict
from fractions import Fraction

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import COMMAND_BYTES, Command, FieldRangeError, Opcode
from perf_model.compiler.vector import ifmap_words
from perf_model.compiler.vector_chunks import vector_op_program
from perf_model.dma_timing import PAGE_BYTES
from perf_model.evaluator.vector_walk import OpWalk, VectorWalks
from perf_model.program_timing import (
    ProgramTiming,
    axi_data_bytes,
    dram_rate,
    program_cycles,
    program_dram_bytes,
    word_beats,
)
from workloads.vector_ops import VectorOp

__all__ = ["op_walk", "walk_key", "program_walk", "clear_caches", "COMPILER_WALKS"]

_CACHE: OrderedDict[tuple[object, ...], OpWalk | str] = OrderedDict()
_CACHE_SIZE = 1 << 15
#: Queue-loads' walks by :func:`_load_key` (the last :data:`_LOADS_SIZE`).
_LOADS: OrderedDict[tuple[object, ...], ProgramTiming] = OrderedDict()
_LOADS_SIZE = 1 << 14
_TRANSFERS = (Opcode.LOAD, Opcode.STORE)
_ADDRESSES = ("dram_addr", "dram_stride")


def clear_caches() -> None:
    """Forget every walk kept (the ops' and the queue-loads')."""
    _CACHE.clear()
    _LOADS.clear()


def _load_key(config: ArrayConfig, commands: tuple[Command, ...], queue_base: int,
              rate: Fraction | None) -> tuple[object, ...]:
    """What :func:`program_cycles` of one queue-load reads (module docstring): the commands with
    their DRAM addresses and strides modulo a page, the fetch address modulo a page, the bus, the
    words' beats, the lanes, the pacing, and the array's shape and dataflow when a ``RUN`` is among them."""
    shaped: list[object] = []
    run = False
    for c in commands:
        if c.opcode in _TRANSFERS:
            shaped.append((c.opcode, c.wait_dma, c.wait_run, c.wait_vec,
                           tuple((n, v % PAGE_BYTES) if n in _ADDRESSES else (n, v) for n, v in c.fields)))
        else:
            run = run or c.opcode == Opcode.RUN
            shaped.append(c)
    array = (config.rows, config.cols, config.dataflow.value, bool(config.shadow_stationary)) if run else None
    return (axi_data_bytes(config), tuple(word_beats(config).items()), config.vector_lanes, rate, array,
            queue_base % PAGE_BYTES, tuple(shaped))


def program_walk(config: ArrayConfig, program: object, rate: Fraction | None) -> tuple[int, int]:
    """``(total, vector)`` cycles of ``gemm_program_cycles(config, program, rate=rate)``, each
    queue-load walked once per :func:`_load_key` (module docstring)."""
    commands: tuple[Command, ...] = tuple(program.commands)  # type: ignore[attr-defined]
    base: int = program.queue_base  # type: ignore[attr-defined]
    total = vector = 0
    for a, b in program.chunks:  # type: ignore[attr-defined]
        part, at = commands[a:b], base + a * COMMAND_BYTES
        key = _load_key(config, part, at, rate)
        t = _LOADS.get(key)
        if t is None:
            t = _LOADS[key] = program_cycles(config, part, queue_base=at, rate=rate)
            if len(_LOADS) > _LOADS_SIZE:
                _LOADS.popitem(last=False)
        else:
            _LOADS.move_to_end(key)
        total += t.total
        vector += t.vector
    return total, vector


def walk_key(config: ArrayConfig) -> tuple[object, ...]:
    """What a vector op's program and walk on ``config`` depend on (module docstring)."""
    from accel_spec.isa import axi_data_bytes as bus_bytes

    beats = word_beats(config)
    isa_bus = bus_bytes(config.rows, config.cols, config.input_bits, config.dram_bytes_per_cycle,
                        config.dataflow.value == "is")
    rate: Fraction | None = dram_rate(config)
    return (config.vector_lanes, ifmap_words(config), axi_data_bytes(config), isa_bus, beats["ifmap"],
            beats["ifmap_lanes"], config.input_bits, rate)


def op_walk(config: ArrayConfig, op: VectorOp, key: tuple[object, ...] | None = None) -> OpWalk | str:
    """The walk of ``vector_op_program(config, op)``, or the reason it cannot be built (one line)."""
    full = (walk_key(config) if key is None else key, op)
    try:
        found = _CACHE[full]
    except KeyError:
        try:
            program = vector_op_program(config, op)
            total, vector = program_walk(config, program, dram_rate(config))
            read, written = program_dram_bytes(config, program.commands)
            found = OpWalk(total, vector, read, written)
        except (ModelError, FieldRangeError) as exc:  # a field past its bits: the reason, as a program's
            found = str(exc)
        _CACHE[full] = found
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return found
    _CACHE.move_to_end(full)
    return found


#: The compiler's vector walks, as the evaluator takes them.
COMPILER_WALKS = VectorWalks(key=walk_key, walk=op_walk)
