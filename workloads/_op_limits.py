"""Limits of workloads that are not builtins, checked before the work: files and traced functions.

A builtin's options are checked by :mod:`workloads._limits` before it is built. A workload file
(ONNX, StableHLO, SCALE-Sim CSV, Timeloop YAML) or a user's JAX function has no options to check:
its ops are. These checks run as its ops are read or traced, before anything is allocated for
them (a reference run, a simulation, a compile):

* at most :data:`MAX_OPS` matrix ops (a file's layer rows, an ONNX graph's nodes, a traced
  function's matrix ops): counted before the ops are built where the format allows it;
* no tensor of a matrix op (``A``, ``B``, ``C`` of a GEMM; input, weights, output of a
  convolution) beyond :data:`~workloads._limits.MAX_ELEMENTS` elements;
* no value of a traced function (any primitive's operand or result, seen on the abstract values
  of ``jax.make_jaxpr``, before anything runs) beyond that many elements;
* the multiply-accumulates: :data:`workloads.ops.MAX_MACS` per op and per workload (the op
  records check them).

Each refusal is one line naming the op or value, its size and the limit.

A program's DRAM footprint passing the 32-bit address space is found before it is compiled by
``perf_model.compiler.dram_space`` (a lower bound of its tensors' bytes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from accel_spec.errors import WorkloadError
from accel_spec.text import shown
from workloads._limits import MAX_ELEMENTS
from workloads.ops import Conv2d, Gemm, Op

__all__ = ["MAX_OPS", "check_op_count", "check_op", "check_ops", "op_tensors", "check_jaxpr_values"]

#: Most matrix ops a workload file or traced function may hold (a whole 80-layer model unrolled
#: is a few thousand).
MAX_OPS = 2**18

_ELEMENTS_RULE = f"beyond the {MAX_ELEMENTS:,} (2**32) a tensor may have in the accelerator's 32-bit DRAM address space"


def check_op_count(count: int, what: str, unit: str = "matrix ops") -> None:
    """Refuse ``count`` ``unit`` in ``what`` beyond :data:`MAX_OPS` (before they are built).

    Raises:
        WorkloadError: one line naming the count and the limit.
    """
    if count > MAX_OPS:
        raise WorkloadError(f"{what} holds {count:,} {unit}, beyond the {MAX_OPS:,} (2**18) a workload may have; "
                            "split it into smaller workloads")


def op_tensors(op: Op) -> tuple[tuple[str, str, int], ...]:
    """``(tensor, size expression, elements)`` of each tensor of ``op``."""
    if isinstance(op, Gemm):
        return (("A", "batch * m * k", op.batch * op.m * op.k), ("B", "batch * k * n", op.batch * op.k * op.n),
                ("C", "batch * m * n", op.batch * op.m * op.n))
    if isinstance(op, Conv2d):
        return (("input", "n * h * w * c_in", op.n * op.h * op.w * op.c_in),
                ("weights", "kh * kw * c_in / groups * c_out", op.kh * op.kw * (op.c_in // op.groups) * op.c_out),
                ("output", "n * out_h * out_w * c_out", op.n * op.out_h * op.out_w * op.c_out))
    return ()  # pragma: no cover - a Workload holds only these


def check_op(op: Op, what: str) -> None:
    """Refuse an op of ``what`` with a tensor beyond :data:`~workloads._limits.MAX_ELEMENTS` elements.

    Raises:
        WorkloadError: one line naming the op, the tensor, its size and the limit.
    """
    for tensor, expression, elements in op_tensors(op):
        if elements > MAX_ELEMENTS:
            label = f" {op.name!r}" if op.name else ""
            raise WorkloadError(f"{what}: {op.kind}{label} {tensor} = {expression} = {elements:,} elements, "
                                f"{_ELEMENTS_RULE}; make it smaller")


def check_ops(ops: Iterable[Op], what: str) -> None:
    """:func:`check_op_count` and :func:`check_op` of every op of ``ops``."""
    ops = tuple(ops)
    check_op_count(len(ops), what)
    for op in ops:
        check_op(op, what)


def _elements(aval: Any) -> int:
    shape = getattr(aval, "shape", None)
    if not isinstance(shape, tuple):
        return 0
    try:
        return math.prod(int(d) for d in shape)
    except (TypeError, ValueError):  # a symbolic dimension: no size to check here
        return 0


def check_jaxpr_values(jaxpr: Any, what: str) -> None:
    """Refuse a traced function one of whose values passes :data:`~workloads._limits.MAX_ELEMENTS` elements.

    Walks ``jaxpr`` (a ``ClosedJaxpr`` or ``Jaxpr``) and its sub-jaxprs on abstract values only:
    nothing is computed or allocated. Also counts its matrix ops against :data:`MAX_OPS`.

    Raises:
        WorkloadError: one line naming the primitive, the value's shape, its size and the limit.
    """
    from jax.extend import core as jex_core

    matrix_ops = 0
    stack = [getattr(jaxpr, "jaxpr", jaxpr)]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for var in (*current.invars, *current.constvars):
            _check_value(getattr(var, "aval", None), "an input of the function", what)
        for eqn in current.eqns:
            name = eqn.primitive.name
            if name in ("dot_general", "conv_general_dilated"):
                matrix_ops += 1
            for var in (*eqn.invars, *eqn.outvars):
                _check_value(getattr(var, "aval", None), f"a value of {shown(name, 40)}", what)
            stack.extend(getattr(sub, "jaxpr", sub) for sub in jex_core.jaxprs_in_params(eqn.params))
    check_op_count(matrix_ops, what)


def _check_value(aval: Any, where: str, what: str) -> None:
    elements = _elements(aval)
    if elements > MAX_ELEMENTS:
        shape = " x ".join(f"{int(d):,}" for d in aval.shape)
        raise WorkloadError(f"{what}: {where} has shape {shape} = {elements:,} elements, {_ELEMENTS_RULE}; "
                            "trace it with smaller shapes")
