"""The walk of each vector op's own program, per design, remembered by what it depends on: the
evaluator's :class:`~perf_model.evaluator.vector_walk.VectorWalks` of the compiler (:data:`COMPILER_WALKS`).

A design with the vector unit that runs a workload op by op runs each vector op as a program of
its own (:func:`perf_model.compiler.vector_chunks.vector_op_program`); its cycles and DRAM bytes
are that program's walk (``perf_model.program_timing``). The program and its walk depend on the
design only through :func:`walk_key` (the lanes, the ifmap's words, the bus, the DRAM words'
beats, the element bytes and the DRAM pacing), so a sweep's designs share walks: each ``(key, op)``
is compiled and walked once and kept (the last :data:`_CACHE_SIZE`).
"""

from __future__ import annotations

from collections import OrderedDict
from fractions import Fraction

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import FieldRangeError
from perf_model.compiler.vector import ifmap_words
from perf_model.compiler.vector_chunks import vector_op_program
from perf_model.evaluator.vector_walk import OpWalk, VectorWalks
from perf_model.program_timing import axi_data_bytes, dram_rate, gemm_program_cycles, program_dram_bytes, word_beats
from workloads.vector_ops import VectorOp

__all__ = ["op_walk", "walk_key", "COMPILER_WALKS"]

_CACHE: OrderedDict[tuple[object, ...], OpWalk | str] = OrderedDict()
_CACHE_SIZE = 1 << 15


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
            t = gemm_program_cycles(config, program, rate=dram_rate(config))
            read, written = program_dram_bytes(config, program.commands)
            found = OpWalk(t.total, t.vector, read, written)
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
