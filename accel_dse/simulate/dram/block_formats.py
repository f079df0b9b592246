"""The steps a transformer block's reference is written with, in the design's activation format.

An int8 design: a GEMM is ``workloads.output_stage(a @ b, requant)``, a vector op the workload's
integer op (``workloads._int_ops``). A design whose activations are fp8 (``fp8_e4m3``,
``fp8_e5m2``) or int4 runs the same int8 vector unit behind its door (``accel_spec.vector_door``):

* fp8: operands are fp8 codes (``workloads.reference(..., number_format=...)``), a GEMM's output
  the fixed-point sum (E4M3; E5M2: float32 in the WS array's ``rows``-deep folds, one K tile
  assumed: the small blocks the tests run) through the fp8 output stage
  (``workloads.float_result``) under the scales of ``workloads.float_outputs``
  (which the DRAM qparams carry too);
* int4: int4 values, the output stage of ``workloads.narrow_outputs`` (saturating to [-8, 7]);
* every vector op through the door's reference (``workloads.vector_door.door_vector_op``): codes
  to the unit's int8, the integer op, back to codes; a transpose moves codes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accel_spec.config import ArrayConfig
from accel_spec.vector_door import door_format

__all__ = ["BlockSteps", "block_steps", "design_gemm"]


@dataclass(frozen=True)
class BlockSteps:
    """``requant(g)``: the output stage's parameters of GEMM ``g`` on the design (what DRAM's qparams
    hold); ``gemm(a, b, g)``: its output codes of operand codes ``a @ b`` (int64); ``vector(op, *args)``:
    vector op ``op`` on activation codes (int64)."""

    requant: Callable[[Any], Any]
    gemm: Callable[[np.ndarray, np.ndarray, Any], np.ndarray]
    vector: Callable[..., np.ndarray]


def design_gemm(design: ArrayConfig, op: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Output codes (int64) of operand codes ``a @ b`` through ``op``'s output stage, ``op`` already
    carrying the design's requant (``workloads.float_outputs`` / ``narrow_outputs``)."""
    import workloads

    if design.weight_fmt.is_int:
        return np.asarray(workloads.output_stage(a @ b, op.requant)).astype(np.int64)
    folds = None
    if design.weight_fmt.accumulator == "fp32":  # E5M2: float32 sums in the array's folds, one K tile assumed
        from accel_spec.config import Dataflow

        folds = (0,) if design.dataflow is Dataflow.OS else tuple(range(0, op.to_gemm().k, design.rows))
    held = np.int8 if design.input_bits == 8 else np.int16  # fp8 codes as int8, bf16 as int16
    _, q = workloads.float_result(op, 0, a.astype(held), b.astype(held), design.weight_fmt.name, folds)
    return np.asarray(q).astype(np.int64)


def block_steps(design: ArrayConfig) -> BlockSteps:
    """The reference's steps on ``design`` (module docstring)."""
    import workloads
    from workloads.vector_door import door_vector_op

    fmt = door_format(design.act_fmt)
    wbits, abits = design.weight_fmt.bits, design.act_fmt.bits

    def requant(g: Any) -> Any:
        if not design.weight_fmt.is_int:
            return workloads.float_outputs(g).requant
        return workloads.narrow_outputs(g, abits, wbits).requant

    def gemm(a: np.ndarray, b: np.ndarray, g: Any) -> np.ndarray:
        return design_gemm(design, dataclasses.replace(g, requant=requant(g)), a, b)

    def vector(op: Any, *args: np.ndarray) -> np.ndarray:
        return door_vector_op(op.kind, dict(op.params), fmt, *args)

    return BlockSteps(requant, gemm, vector)
