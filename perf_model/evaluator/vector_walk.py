"""Each design's vector-op walks, as the evaluator takes them (``vector_work.vector_columns``).

The evaluator sits below the compiler and imports none of it: whoever asks it for a workload's
vector work passes :class:`VectorWalks` (``perf_model.compiler.vector_walk.COMPILER_WALKS``: each
op's own program, walked). :func:`design_keys` groups designs by what the walk depends on, so each
``(key, op)`` is walked once for all the designs that share it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import numpy as np

from accel_spec.config import ArrayConfig
from accel_spec.errors import AccelDseError
from perf_model.arrays.designs import DesignArrays
from workloads.vector_ops import VectorOp

__all__ = ["OpWalk", "VectorWalks", "design_keys"]

#: Design columns no vector op's program or walk depends on (the other buffers, the node, ...).
_BLIND = frozenset({"weight_sram_kib", "ofmap_sram_kib", "tech_nm", "checksum", "shadow_stationary",
                    "max_power_density_w_mm2", "acc_bits"})
_KEYS_SIZE = 1 << 15
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


@dataclass(frozen=True)
class VectorWalks:
    """``key(config)``: what an op's walk on ``config`` depends on; ``walk(config, op, key)``: the
    walk of ``op``'s own program on ``config`` (whose key is ``key``), or why it cannot be built."""

    key: Callable[[ArrayConfig], tuple[object, ...]]
    walk: Callable[[ArrayConfig, VectorOp, tuple[object, ...]], OpWalk | str]


_Key = tuple[object, ...]


def design_keys(d: DesignArrays, index: np.ndarray,
                key: Callable[[ArrayConfig], _Key]) -> tuple[np.ndarray, list[tuple[ArrayConfig, _Key]]]:
    """For designs ``index`` of ``d``: each one's position in the returned list of distinct
    ``(config, key(config))`` (one config per distinct key; designs alike but for :data:`_BLIND`
    columns are built as a config once, and remembered across calls)."""
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
                known = _KEYS[row] = (config, key(config))
                if len(_KEYS) > _KEYS_SIZE:
                    _KEYS.pop(next(iter(_KEYS)))
            config, walk_key = known
            at = keys.get(walk_key)
            if at is None:
                at = keys[walk_key] = len(out)
                out.append((config, walk_key))
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
