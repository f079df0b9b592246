"""The walk of each vector op's own program, per design, remembered by what it depends on.

A design with the vector unit that runs a workload op by op runs each vector op as a program of
its own (:func:`perf_model.compiler.vector_chunks.vector_op_program`); its cycles and DRAM bytes
are that program's walk (``perf_model.program_timing``). The program and its walk depend on the
design only through :func:`walk_key` (the lanes, the ifmap's words, the bus, the DRAM words'
beats, the element bytes and the DRAM pacing), so a sweep's designs share walks: each ``(key, op)``
is compiled and walked once and kept (the last :data:`_CACHE_SIZE`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields, replace
from fractions import Fraction

import numpy as np

from accel_spec.config import ArrayConfig
from accel_spec.errors import AccelDseError, ModelError
from perf_model.arrays.designs import DesignArrays
from perf_model.compiler.vector import ifmap_words
from perf_model.compiler.vector_chunks import vector_op_program
from perf_model.program_timing import axi_data_bytes, dram_rate, gemm_program_cycles, program_dram_bytes, word_beats
from workloads.vector_ops import VectorOp

__all__ = ["OpWalk", "op_walk", "walk_key", "design_keys"]

#: Design columns no vector op's program or walk depends on (the other buffers, the node, ...).
_BLIND = frozenset({"weight_sram_kib", "ofmap_sram_kib", "tech_nm", "checksum", "shadow_stationary",
                    "max_power_density_w_mm2", "acc_bits"})

_CACHE: OrderedDict[tuple[object, ...], OpWalk | str] = OrderedDict()
_CACHE_SIZE = 1 << 15
#: A design's columns (but :data:`_BLIND`) -> its config and walk key, across calls (a sweep's
#: designs come back in every block and every workload).
_KEYS: dict[tuple[object, ...], tuple[ArrayConfig, tuple[object, ...]]] = {}


@dataclass(frozen=True)
class OpWalk:
    """One run of a vector op's program: ``total`` cycles, ``vector`` (the unit busy, cycles),
    DRAM bytes ``read`` and ``written`` (``program_timing.program_dram_bytes``)."""

    total: int
    vector: int
    read: int
    written: int


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
        except ModelError as exc:
            found = str(exc)
        _CACHE[full] = found
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return found
    _CACHE.move_to_end(full)
    return found


def design_keys(d: DesignArrays, index: np.ndarray) -> tuple[np.ndarray, list[tuple[ArrayConfig, tuple[object, ...]]]]:
    """For designs ``index`` of ``d``: each one's position in the returned list of distinct
    ``(config, walk_key)`` (one config per distinct key; designs alike but for :data:`_BLIND`
    columns are built as a config once)."""
    names = [f.name for f in fields(d) if f.name not in _BLIND]
    columns = [getattr(d, name)[index].tolist() for name in names]
    rows: dict[tuple[object, ...], int] = {}  # a design's columns -> its position in ``out``
    keys: dict[tuple[object, ...], int] = {}
    out: list[tuple[ArrayConfig, tuple[object, ...]]] = []
    position = np.empty(len(index), dtype=np.int64)
    for j, row in enumerate(zip(*columns, strict=True)):
        at = rows.get(row)
        if at is None:
            known = _KEYS.get(row)
            if known is None:
                config = _walk_config(d, int(index[j]))
                known = _KEYS[row] = (config, walk_key(config))
                if len(_KEYS) > _CACHE_SIZE:
                    _KEYS.pop(next(iter(_KEYS)))
            config, key = known
            at = keys.get(key)
            if at is None:
                at = keys[key] = len(out)
                out.append((config, key))
            rows[row] = at
        position[j] = at
    return position, out


def _walk_config(d: DesignArrays, i: int) -> ArrayConfig:
    """Design ``i`` as an ``ArrayConfig``; one whose accumulator its formats refuse (a table built
    from columns) with the first width they take (the walk does not see it: :data:`_BLIND`)."""
    try:
        return d.config(i)
    except AccelDseError:
        one = d.take(np.array([i]))
        for bits in (32, 37, 48, 64):
            try:
                return replace(one, acc_bits=np.array([bits]), checksum=np.zeros(1, dtype=one.checksum.dtype)).config(0)
            except AccelDseError:
                continue
        raise
