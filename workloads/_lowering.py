"""Shared lowering of matmul and convolution geometry to op records (stdlib only).

Every importer (the jaxpr tracer, StableHLO, ONNX) reads the shapes and attributes of its own
format and hands them here, so a contraction or a convolution becomes the same
:class:`~workloads.ops.Gemm` / :class:`~workloads.ops.Conv2d` whatever it was read from:

* :func:`dot_op`: ``dot_general``-style dimension numbers -> ``Gemm`` (``batch`` = product of the
  batch dims, ``k`` of the contracting dims, ``m`` / ``n`` of the lhs / rhs free dims).
* :func:`conv_op`: per-spatial-axis size, kernel, stride, padding, input (lhs) and kernel (rhs)
  dilation -> ``Conv2d`` for one or two spatial axes (one axis: ``w = kw = 1``), the im2col
  ``Gemm`` for three or more or for ``batch_group_count > 1``. An input dilation counts as the
  zero-stuffed input it computes on; negative padding crops the input.

:class:`Collected` gathers ops with their run counts and the other primitives while walking a
program; :func:`to_workload` turns it into a :class:`~workloads.ops.Workload`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from accel_spec.errors import WorkloadError
from accel_spec.text import shown
from workloads.ops import Conv2d, Gemm, Op, VectorOp, Workload

__all__ = ["Collected", "dot_op", "conv_op", "to_workload"]


@dataclass
class Collected:
    """Ops and primitive counts found while walking a program (or one part of it)."""

    ops: list[Op] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    others: Counter[str] = field(default_factory=Counter)
    #: Output elements of the other primitives (times how often each runs), where the reader knows them.
    elements: Counter[str] = field(default_factory=Counter)
    vector: list[tuple[VectorOp, int, int]] = field(default_factory=list)  # (op, count, matrix ops before it)

    @property
    def macs(self) -> int:
        """Multiply-accumulates of everything collected (each op times its count)."""
        return sum(op.macs * c for op, c in zip(self.ops, self.counts, strict=True))

    def add(self, op: Op | None, mult: int, what: str) -> None:
        """Record ``op`` running ``mult`` times; ``None`` (a zero-size operand) counts as ``what[empty]``."""
        if op is None:
            self.others[f"{what}[empty]"] += mult
        else:
            self.ops.append(op)
            self.counts.append(mult)

    def add_vector(self, op: VectorOp, mult: int) -> None:
        """Record the vector op ``op`` running ``mult`` times, after the matrix ops so far."""
        self.vector.append((op, mult, len(self.ops)))

    def extend(self, other: Collected, times: int = 1) -> None:
        """Append everything in ``other``, each count multiplied by ``times``."""
        self.vector.extend((op, c * times, after + len(self.ops)) for op, c, after in other.vector)
        self.ops.extend(other.ops)
        self.counts.extend(c * times for c in other.counts)
        for name, count in other.others.items():
            self.others[name] += count * times
        for name, count in other.elements.items():
            self.elements[name] += count * times


def _prod(values: Sequence[int]) -> int:
    return math.prod(int(v) for v in values)


def dot_op(lhs: Sequence[int], rhs: Sequence[int], lhs_contract: Sequence[int], rhs_contract: Sequence[int],
           lhs_batch: Sequence[int] = (), rhs_batch: Sequence[int] = (), *, name: str = "",
           origin: str = "") -> Gemm | None:
    """The ``Gemm`` of a ``dot_general`` of an ``lhs``-shaped A and an ``rhs``-shaped B.

    Args:
        lhs, rhs: Operand shapes (elements per axis).
        lhs_contract, rhs_contract: Contracting axes of each operand (equal sizes, pairwise).
        lhs_batch, rhs_batch: Batch axes of each operand (equal sizes, pairwise).
        name, origin: Copied to the record.

    Returns:
        The record, or ``None`` when an operand has no elements (no work).
    """
    batch = _prod([lhs[d] for d in lhs_batch])
    k = _prod([lhs[d] for d in lhs_contract])
    m = _prod([lhs[d] for d in range(len(lhs)) if d not in lhs_contract and d not in lhs_batch])
    n = _prod([rhs[d] for d in range(len(rhs)) if d not in rhs_contract and d not in rhs_batch])
    if min(batch, k, m, n) == 0:
        return None
    return Gemm(m=m, k=k, n=n, batch=batch, name=name, origin=origin)


def conv_op(*, n: int, c_in: int, c_out: int, spatial: Sequence[int], kernel: Sequence[int],
            strides: Sequence[int], padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int] | None = None,
            rhs_dilation: Sequence[int] | None = None, groups: int = 1, batch_groups: int = 1,
            name: str = "", origin: str = "") -> Op | None:
    """The record of a convolution given per spatial axis (as ``lax.conv_general_dilated`` takes it).

    Args:
        n: Images (the lhs batch dimension).
        c_in, c_out: Input channels (lhs feature dim) and output channels (rhs output feature dim).
        spatial: Input size of each spatial axis, before padding and input dilation.
        kernel: Kernel size of each spatial axis.
        strides: Window stride of each axis.
        padding: ``(low, high)`` padding of each axis (negative crops).
        lhs_dilation: Input dilation of each axis (a transposed conv's stride); default 1.
        rhs_dilation: Kernel dilation of each axis; default 1.
        groups: ``feature_group_count``.
        batch_groups: ``batch_group_count`` (weight gradients of grouped convs).
        name, origin: Copied to the record.

    Returns:
        A ``Conv2d`` (1 or 2 spatial axes), the im2col ``Gemm`` (3 or more axes, or batch
        groups), or ``None`` when an operand or the output has no elements.
    """
    rank = len(spatial)
    lhs_dil = list(lhs_dilation or [1] * rank)
    rhs_dil = list(rhs_dilation or [1] * rank)
    sizes, pads = [], []
    for size, ld, (lo, hi) in zip(spatial, lhs_dil, padding, strict=True):
        size = (int(size) - 1) * int(ld) + 1 if size else 0  # zero-stuffed input of a transposed conv
        size += min(int(lo), 0) + min(int(hi), 0)  # negative padding crops
        sizes.append(size)
        pads.append((max(int(lo), 0), max(int(hi), 0)))
    spans = [d * (k - 1) + 1 for d, k in zip(rhs_dil, kernel, strict=True)]
    outs = [(s + lo + hi - span) // st + 1 if s + lo + hi >= span else 0
            for s, (lo, hi), span, st in zip(sizes, pads, spans, strides, strict=True)]
    if 0 in (n, c_in, c_out, *sizes, *kernel, *outs):
        return None
    if rank not in (1, 2) or batch_groups > 1:
        # im2col directly: M = output pixels, K = window size, N = output channels per group.
        g = groups * batch_groups
        return Gemm(m=(n // batch_groups) * _prod(outs), k=(c_in // groups) * _prod(kernel), n=c_out // g,
                    batch=g, name=name, origin=origin)
    if rank == 1:
        sizes.append(1)
        kernel = [*kernel, 1]
        pads.append((0, 0))
    st = [int(s) for s in strides] + [1] * (2 - rank)
    dil = [int(d) for d in rhs_dil] + [1] * (2 - rank)
    return Conv2d(
        n=n, h=sizes[0], w=sizes[1], c_in=c_in, c_out=c_out, kh=int(kernel[0]), kw=int(kernel[1]),
        stride_h=st[0], stride_w=st[1], pad_h=pads[0][0], pad_h_hi=pads[0][1],
        pad_w=pads[1][0], pad_w_hi=pads[1][1], dilation_h=dil[0], dilation_w=dil[1],
        groups=groups, name=name, origin=origin,
    )


def to_workload(found: Collected, *, name: str, description: str, source: str, looked_for: str) -> Workload:
    """The :class:`Workload` of what was collected.

    Raises:
        WorkloadError: if nothing was collected (``looked_for`` names the ops searched, and the
            primitives that were there are listed).
    """
    if not found.ops:
        kinds: Counter[str] = Counter()
        for op, count, _ in found.vector:
            kinds[f"vector op {op.kind}"] += count
        seen = ", ".join(f"{p} x{c}" for p, c in sorted({**found.others, **kinds}.items())) or "no primitives"
        raise WorkloadError(f"{name} contains no matmul or convolution ({looked_for}); it has: {shown(seen, 300)}")
    return Workload(name=name, ops=tuple(found.ops), counts=tuple(found.counts),
                    other_primitives=tuple(sorted(found.others.items())),
                    other_elements=tuple(sorted(found.elements.items())), description=description,
                    source=source, vector_ops=tuple(v[0] for v in found.vector),
                    vector_counts=tuple(v[1] for v in found.vector), vector_after=tuple(v[2] for v in found.vector))
