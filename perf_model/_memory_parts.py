"""The off-chip memory a design names: sustained bandwidth per cycle and energy per byte (internal).

A design's ``dram`` names a part of :data:`accel_spec.config.MEMORY_KINDS` (``"lpddr5-x32"``,
:data:`accel_spec.config.DEFAULT_MEMORY`, when it names none), or is ``"none"`` (code ``0``), ideal
memory. The bandwidth the model uses is never more than either limit allows::

    bytes per cycle = min(dram_bytes_per_cycle, GB/s * 1e3 / clock_mhz)     (a part named)
    bytes per cycle = dram_bytes_per_cycle                                  ("none")

so ``dram_bytes_per_cycle`` stays the interface's limit and the part adds its peak GB/s, which
buys fewer bytes per cycle at a faster clock. The cycle model (``perf_model.evaluator.transfers``) moves
at most one beat of the AXI bus per cycle and stretches each beat when this figure is below it.
DRAM energy per byte is the part's pJ/bit times 8, and 0 for ``"none"`` (ideal memory costs nothing,
so a design that chooses it is priced on die alone; tables show it as "ideal memory").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accel_spec.config import DEFAULT_MEMORY, MEMORY_KINDS, MEMORY_NAMES

__all__ = ["effective_dram_bytes_per_cycle", "dram_pj_per_byte", "memory_code", "MEMORY_GB_PER_S"]

#: Peak GB/s by memory code (``inf`` for ``"none"``: no limit beyond ``dram_bytes_per_cycle``).
MEMORY_GB_PER_S = np.array([np.inf] + [MEMORY_KINDS[n].gb_per_s for n in MEMORY_NAMES[1:]])
#: DRAM energy per byte by memory code, pJ (0 for ``"none"``, ideal memory).
_PJ_PER_BYTE = np.array([0.0] + [8.0 * MEMORY_KINDS[n].pj_per_bit for n in MEMORY_NAMES[1:]])


def memory_code(name: str) -> int:
    """Code of the memory kind ``name`` (``"none"`` is 0); ``ValueError`` if unknown."""
    return MEMORY_NAMES.index(name)


def _codes(dram: Any) -> np.ndarray:
    values = np.asarray(dram)
    if values.dtype.kind in "USO":
        return np.vectorize(memory_code, otypes=[np.int64])(values) if values.size else values.astype(np.int64)
    return values.astype(np.int64)


def effective_dram_bytes_per_cycle(dram_bytes_per_cycle: Any, dram: Any = DEFAULT_MEMORY,
                                   clock_mhz: Any = 1000.0) -> np.ndarray:
    """Sustained DRAM bandwidth the model uses, bytes per clock cycle (vectorised).

    Args:
        dram_bytes_per_cycle: the design's per-cycle limit (``ArrayConfig.dram_bytes_per_cycle``).
        dram: memory kind names or codes (``"none"`` / 0: ideal memory, the per-cycle figure alone).
        clock_mhz: clock, MHz.

    Returns:
        ``min(dram_bytes_per_cycle, GB/s * 1e3 / clock_mhz)`` per element (module docstring).
    """
    gbps = MEMORY_GB_PER_S[_codes(dram)]
    return np.minimum(np.asarray(dram_bytes_per_cycle, dtype=np.float64),
                      gbps * 1e3 / np.asarray(clock_mhz, dtype=np.float64))


def dram_pj_per_byte(dram: Any) -> np.ndarray:
    """DRAM energy per byte moved, pJ (vectorised over names or codes): the part's pJ/bit x 8, 0 for
    ``"none"`` (ideal memory)."""
    return _PJ_PER_BYTE[_codes(dram)]
