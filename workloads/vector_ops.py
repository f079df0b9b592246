"""Vector op records: the element-wise and row-wise work between matrix ops (stdlib only, no JAX).

A :class:`VectorOp` is one call of an integer op of :mod:`workloads._int_ops` (a residual add,
a pooling, a normalisation, a softmax, an activation, a rotary embedding), or the ONNX node that
maps to one. It carries what a vector unit needs to run it: the kind, the shape of its (first)
input and of its output, the reduction axis, and the integer parameters of its arithmetic
(multipliers, shifts, constants, window, mask offset) by name. The records live beside a
:class:`~workloads.ops.Workload`'s matrix ops (``Workload.vector_ops``). A design with the
vector unit runs them (``perf_model.vector_timing`` gives their cycles, or the reason one stays
host work, e.g. a RoPE whose half head is not whole words of the unit's lanes); on a design
without it they are host work, listed with their elements.

Kinds (:data:`VECTOR_KINDS`) and their parameters as the builtins' int8 form emits them
(``docs/workloads.md``, "Integer vector ops", states each algorithm):

* ``add``: ``mult_a``, ``mult_b``, ``shift`` (``out = sat8(rshr(a * mult_a + b * mult_b, shift))``);
* ``mul``: ``shift``; ``relu``; ``relu6``: ``act_max`` (the code of 6.0);
* ``maxpool``, ``avgpool``: ``window_h``, ``window_w``, ``stride_h``, ``stride_w``, ``pad_h``, ``pad_w``
  (a global average pool is the window of the whole map);
* ``layernorm``, ``rmsnorm``: ``rsqrt_const``, ``rsqrt_bits``, ``eps``;
* ``softmax``: ``in_mult``, ``ln2``, ``poly_b``, ``poly_a``, ``poly_c``, ``causal_offset`` (-1: no mask);
* ``gelu``: ``in_mult``, ``clip``, ``poly_a``; ``silu``: ``gated`` (0 or 1);
* ``rope``: ``start`` (first position), ``theta`` (the frequency base) and, for a scaled RoPE,
  ``scaling``, ``factor_q16``, ``low_freq_q16``, ``high_freq_q16``, ``original``
  (:mod:`workloads._rope_scaling`); on the vector unit its cos/sin table is a second operand the
  host prepares once, like weights.

Every int8 op takes and gives codes with :data:`FRAC_BITS` fractional bits (the builtins' scale).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from accel_spec.errors import WorkloadError
from accel_spec.vector_door import UNIT_FRAC_BITS

__all__ = ["VectorOp", "VECTOR_KINDS", "FRAC_BITS", "check_vector_fields"]

#: Kinds of vector op, in the order ``workloads show`` lists them.
VECTOR_KINDS = ("add", "mul", "relu", "relu6", "maxpool", "avgpool", "layernorm", "rmsnorm", "softmax",
                "gelu", "silu", "rope")

#: Fractional bits of the int8 activation codes the integer ops take and give (value = code / 16):
#: the vector unit's (``accel_spec.vector_door``, whose door converts other activation formats to it).
FRAC_BITS = UNIT_FRAC_BITS


def _shape(owner: str, what: str, value: object) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise WorkloadError(f"{owner} {what} must be a sequence of positive integers, not {value!r}")
    dims = tuple(value)  # type: ignore[arg-type]
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or int(d) <= 0:
            raise WorkloadError(f"{owner} {what} must hold positive integers, not {value!r}")
    return tuple(int(d) for d in dims)


@dataclass(frozen=True, kw_only=True)
class VectorOp:
    """One vector op: ``kind`` on an input of ``shape`` giving ``out_shape``.

    Attributes:
        kind: One of :data:`VECTOR_KINDS`.
        shape: Shape of the (first) input, in elements.
        out_shape: Shape of the output (default: ``shape``).
        axis: The reduction axis (non-negative) of a normalisation or softmax, else ``None``.
        params: ``(name, int)`` pairs: the integer parameters of the op's arithmetic.
        bits: Width of the input and output codes (8).
        name: Free-form label (the ``jax.named_scope`` path or the ONNX node name).
        origin: Where it came from (as :attr:`workloads.ops.Gemm.origin`); not part of equality.
    """

    kind: str
    shape: tuple[int, ...]
    out_shape: tuple[int, ...] | None = None
    axis: int | None = None
    params: tuple[tuple[str, int], ...] = ()
    bits: int = 8
    name: str = ""
    origin: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.kind not in VECTOR_KINDS:
            raise WorkloadError(f"vector op kind must be one of {', '.join(VECTOR_KINDS)}, not {self.kind!r}")
        owner = f"vector op {self.kind}"
        object.__setattr__(self, "shape", _shape(owner, "shape", self.shape))
        out = self.shape if self.out_shape is None else _shape(owner, "out_shape", self.out_shape)
        object.__setattr__(self, "out_shape", out)
        if self.axis is not None:
            axis = self.axis
            if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not 0 <= axis < len(self.shape):
                raise WorkloadError(f"{owner} axis must be an integer in [0, {len(self.shape) - 1}], not {axis!r}")
            object.__setattr__(self, "axis", int(axis))
        pairs: list[tuple[str, int]] = []
        for item in self.params:
            if (not isinstance(item, tuple) or len(item) != 2 or not isinstance(item[0], str)
                    or isinstance(item[1], bool) or not isinstance(item[1], numbers.Integral)):
                raise WorkloadError(f"{owner} params must be (name, integer) pairs, not {item!r}")
            pairs.append((item[0], int(item[1])))
        object.__setattr__(self, "params", tuple(pairs))
        if isinstance(self.bits, bool) or not isinstance(self.bits, numbers.Integral) or not 2 <= self.bits <= 16:
            raise WorkloadError(f"{owner} bits must be an integer in [2, 16], not {self.bits!r}")
        for what in ("name", "origin"):
            if not isinstance(getattr(self, what), str):
                raise WorkloadError(f"{owner} {what} must be a string, not {getattr(self, what)!r}")

    @property
    def elements(self) -> int:
        """Elements of the (first) input: what the unit reads per operand."""
        return math.prod(self.shape)

    @property
    def out_elements(self) -> int:
        """Elements of the output."""
        return math.prod(self.out_shape or self.shape)

    @property
    def rows(self) -> int:
        """Independent rows of a reduction along :attr:`axis` (1 when there is no axis)."""
        return self.elements // self.shape[self.axis] if self.axis is not None else 1

    def param(self, name: str, default: int | None = None) -> int:
        """The parameter ``name`` (``default`` when absent; ``WorkloadError`` when absent without one)."""
        for key, value in self.params:
            if key == name:
                return value
        if default is None:
            raise WorkloadError(f"vector op {self.kind} has no parameter {name!r}")
        return default


def check_vector_fields(ops: Any, counts: Any, after: Any, matrix_ops: int) -> tuple[tuple[Any, ...], ...]:
    """The checked ``(vector_ops, vector_counts, vector_after)`` of a workload with ``matrix_ops`` ops.

    ``vector_counts`` empty means each runs once; ``vector_after`` empty means all come after
    the matrix ops; ``vector_after[i]`` is how many matrix ops precede op ``i`` in program order.
    """
    ops = tuple(ops)
    for op in ops:
        if not isinstance(op, VectorOp):
            raise WorkloadError(f"workload vector_ops must be VectorOp records, not {op!r}")
    counts = tuple(counts) if counts else (1,) * len(ops)
    after = tuple(after) if after else (matrix_ops,) * len(ops)
    for label, values, low, high in (("vector_counts", counts, 1, None), ("vector_after", after, 0, matrix_ops)):
        if len(values) != len(ops):
            raise WorkloadError(f"workload {label} must have one entry per vector op ({len(ops)}), not {len(values)}")
        for v in values:
            if (isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < low
                    or (high is not None and int(v) > high)):
                rule = f"an integer in [{low}, {high}]" if high is not None else f"an integer >= {low}"
                raise WorkloadError(f"workload {label} entries must each be {rule}, not {v!r}")
    return ops, tuple(int(c) for c in counts), tuple(int(a) for a in after)
