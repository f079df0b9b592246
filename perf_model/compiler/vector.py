"""The compiler's vector side: a :class:`~workloads.vector_ops.VectorOp` as the vector unit's registers.

:func:`vector_registers` gives what one ``start`` of ``rtl_gen.core.vector_unit.VectorUnit`` (one
VECTOR command) takes for ``op`` with its rows at word ``src`` (``src2``: the second operand of an
add, a product or a gated SiLU) and its output at ``dst``: the kind's code, the geometry of
:func:`perf_model.vector_timing.vector_plan` and the parameter registers of
:func:`accel_dse.vector_isa.unit_params` (the record's integers and the constants derived from
them, e.g. the exact multiplier of a softmax's ``floor(a / ln 2)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from accel_dse.errors import ModelError
from accel_dse.vector_isa import VECTOR_CODES, unit_params
from perf_model.vector_timing import VectorPlan, vector_plan
from workloads.vector_ops import VectorOp

__all__ = ["VectorRegisters", "vector_registers"]


@dataclass(frozen=True)
class VectorRegisters:
    """One run of the vector unit: its plan, word addresses and parameter registers."""

    plan: VectorPlan
    kind: int
    src: int
    src2: int
    dst: int
    params: tuple[int, ...]

    def packed_params(self) -> int:
        """The parameter registers as the unit's ``params`` port (32 bits each, register 0 lowest)."""
        return sum((v & 0xFFFFFFFF) << (32 * i) for i, v in enumerate(self.params))


def vector_registers(op: VectorOp, lanes: int, *, src: int = 0, src2: int = 0, dst: int = 0) -> VectorRegisters:
    """The unit's registers for ``op`` (module docstring).

    Raises:
        ModelError: the unit cannot run ``op`` (the message is :func:`vector_plan`'s reason).
    """
    plan = vector_plan(op, lanes)
    if isinstance(plan, str):
        raise ModelError(plan)
    return VectorRegisters(plan, VECTOR_CODES[op.kind], src, src2, dst, unit_params(op.kind, dict(op.params), plan.n))
