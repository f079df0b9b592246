"""The jaxpr tracer: any JAX function -> a :class:`~workloads.ops.Workload` of GEMM/conv ops.

:func:`trace` runs ``jax.make_jaxpr`` on the function (no arithmetic runs when the example
arguments are ``jax.ShapeDtypeStruct``) and walks the jaxpr and every sub-jaxpr
(``jax.extend.core.jaxprs_in_params``): ``jit``, ``custom_jvp_call``/``custom_vjp_call``,
``remat`` and any other higher-order primitive are entered once; a ``scan`` body counts
``length`` times; of a ``cond``'s branches the one with the most MACs counts (one branch runs
per call: the worst case); a ``while`` body and condition count ``while_trips`` times (default
1: a while loop's trip count is not known when tracing).

Mapping of primitives to op records:

* ``dot_general`` with any dimension numbers -> :class:`~workloads.ops.Gemm`: ``batch`` is the
  product of the batch dimensions, ``k`` of the contracting dimensions, ``m`` of the lhs's other
  dimensions and ``n`` of the rhs's other dimensions (1 if there are none: a matrix-vector
  product). The lhs is ``A`` (input), the rhs ``B`` (weights).
* ``conv_general_dilated`` with any dimension layout and ``feature_group_count`` with two
  spatial dimensions -> :class:`~workloads.ops.Conv2d` (one spatial dimension: ``w = kw = 1``).
  An lhs (input) dilation counts as the zero-stuffed input it computes on; negative padding
  crops the input. Three or more spatial dimensions, or ``batch_group_count > 1`` (weight
  gradients of grouped convs), lower directly to the im2col :class:`~workloads.ops.Gemm`.

Every other primitive is counted (times its multiplier) in ``Workload.other_primitives``: that
is the work the array does not run. Op names come from ``jax.named_scope`` (falling back to
``dot<i>`` / ``conv<i>``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.extend.core as jex_core

from accel_dse.errors import WorkloadError
from workloads.ops import Conv2d, Gemm, Op, Workload

__all__ = ["trace", "trace_jaxpr"]

#: Higher-order primitives handled specially; every other one with sub-jaxprs is entered once.
_SCAN, _COND, _WHILE = "scan", "cond", "while"


@dataclass
class _Collected:
    """Ops and primitive counts found in one (sub-)jaxpr walk."""

    ops: list[Op] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    others: Counter[str] = field(default_factory=Counter)

    @property
    def macs(self) -> int:
        return sum(op.macs * c for op, c in zip(self.ops, self.counts, strict=True))

    def extend(self, other: _Collected) -> None:
        self.ops.extend(other.ops)
        self.counts.extend(other.counts)
        self.others.update(other.others)


def _prod(values: Sequence[int]) -> int:
    return math.prod(int(v) for v in values)


def _label(eqn: Any, fallback: str) -> str:
    """The equation's ``jax.named_scope`` path, else ``fallback`` (kept inside transform names)."""
    stack = str(getattr(eqn.source_info, "name_stack", "") or "")
    if not stack:
        return fallback
    if "()" in stack:  # a transform around no scope, e.g. "transpose(jvp())"
        return stack.replace("()", f"({fallback})", 1)
    return stack


def _dot_to_gemm(eqn: Any, name: str) -> Gemm | None:
    lhs, rhs = (v.aval.shape for v in eqn.invars[:2])
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    batch = _prod([lhs[d] for d in lb])
    k = _prod([lhs[d] for d in lc])
    m = _prod([lhs[d] for d in range(len(lhs)) if d not in lc and d not in lb])
    n = _prod([rhs[d] for d in range(len(rhs)) if d not in rc and d not in rb])
    if min(batch, k, m, n) == 0:
        return None
    return Gemm(m=m, k=k, n=n, batch=batch, name=name)


def _conv_to_op(eqn: Any, name: str) -> Op | None:
    p = eqn.params
    lhs_shape, rhs_shape = (v.aval.shape for v in eqn.invars[:2])
    out_shape = eqn.outvars[0].aval.shape
    dn = p["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = dn.lhs_spec, dn.rhs_spec, dn.out_spec
    groups = int(p["feature_group_count"])
    batch_groups = int(p["batch_group_count"])
    n_img = int(lhs_shape[lhs_spec[0]])
    c_in = int(lhs_shape[lhs_spec[1]])
    c_out = int(rhs_shape[rhs_spec[0]])
    spatial = [int(lhs_shape[d]) for d in lhs_spec[2:]]
    kernel = [int(rhs_shape[d]) for d in rhs_spec[2:]]
    out_spatial = [int(out_shape[d]) for d in out_spec[2:]]
    if 0 in (n_img, c_in, c_out, *spatial, *kernel, *out_spatial):
        return None
    if len(spatial) not in (1, 2) or batch_groups > 1:
        # im2col directly: M = output pixels, K = window size, N = output channels per group.
        out_pixels = int(out_shape[out_spec[0]]) * _prod(out_spatial)
        g = groups * batch_groups
        return Gemm(m=out_pixels, k=(c_in // groups) * _prod(kernel), n=c_out // g, batch=g, name=name)
    sizes, pads = [], []
    for size, ld, (lo, hi) in zip(spatial, p["lhs_dilation"], p["padding"], strict=True):
        size = (size - 1) * int(ld) + 1  # zero-stuffed input of a transposed conv
        size += min(int(lo), 0) + min(int(hi), 0)  # negative padding crops
        sizes.append(size)
        pads.append((max(int(lo), 0), max(int(hi), 0)))
    if len(spatial) == 1:
        sizes.append(1)
        kernel.append(1)
        pads.append((0, 0))
    strides = [int(s) for s in p["window_strides"]] + [1] * (2 - len(spatial))
    dil = [int(d) for d in p["rhs_dilation"]] + [1] * (2 - len(spatial))
    return Conv2d(
        n=n_img, h=sizes[0], w=sizes[1], c_in=c_in, c_out=c_out, kh=kernel[0], kw=kernel[1],
        stride_h=strides[0], stride_w=strides[1], pad_h=pads[0][0], pad_h_hi=pads[0][1],
        pad_w=pads[1][0], pad_w_hi=pads[1][1], dilation_h=dil[0], dilation_w=dil[1],
        groups=groups, name=name,
    )


class _Walker:
    def __init__(self, while_trips: int) -> None:
        self.while_trips = while_trips
        self.index = 0

    def walk(self, jaxpr: Any, mult: int) -> _Collected:
        out = _Collected()
        for eqn in jaxpr.eqns:
            prim = eqn.primitive.name
            if prim == "dot_general":
                self.index += 1
                self._add(out, _dot_to_gemm(eqn, _label(eqn, f"dot{self.index}")), mult, prim)
            elif prim == "conv_general_dilated":
                self.index += 1
                self._add(out, _conv_to_op(eqn, _label(eqn, f"conv{self.index}")), mult, prim)
            elif prim == _SCAN:
                out.extend(self.walk(eqn.params["jaxpr"].jaxpr, mult * int(eqn.params["length"])))
            elif prim == _COND:
                branches = [self.walk(b.jaxpr, mult) for b in eqn.params["branches"]]
                out.extend(max(branches, key=lambda c: c.macs))
            elif prim == _WHILE:
                trips = mult * self.while_trips
                out.extend(self.walk(eqn.params["cond_jaxpr"].jaxpr, trips))
                out.extend(self.walk(eqn.params["body_jaxpr"].jaxpr, trips))
            else:
                subs = list(jex_core.jaxprs_in_params(eqn.params))
                if subs:
                    for sub in subs:
                        out.extend(self.walk(sub, mult))
                else:
                    out.others[prim] += mult
        return out

    @staticmethod
    def _add(out: _Collected, op: Op | None, mult: int, prim: str) -> None:
        if op is None:  # a zero-size operand: no work
            out.others[f"{prim}[empty]"] += mult
        else:
            out.ops.append(op)
            out.counts.append(mult)


def trace_jaxpr(closed_jaxpr: Any, *, name: str, description: str = "", while_trips: int = 1) -> Workload:
    """Turn a (closed) jaxpr into a :class:`Workload`.

    Args:
        closed_jaxpr: What ``jax.make_jaxpr(fn)(*args)`` returns (or a bare ``Jaxpr``).
        name: The workload's name.
        description: One line for humans.
        while_trips: How many times each ``while`` loop's body is assumed to run.

    Raises:
        WorkloadError: if the jaxpr contains no ``dot_general`` or ``conv_general_dilated``.
    """
    jaxpr = getattr(closed_jaxpr, "jaxpr", closed_jaxpr)
    found = _Walker(while_trips).walk(jaxpr, 1)
    if not found.ops:
        seen = ", ".join(f"{p} x{c}" for p, c in sorted(found.others.items())) or "no primitives"
        raise WorkloadError(f"{name} contains no matmul or convolution (dot_general, "
                            f"conv_general_dilated); it has: {seen}")
    return Workload(
        name=name,
        ops=tuple(found.ops),
        counts=tuple(found.counts),
        other_primitives=tuple(sorted(found.others.items())),
        description=description,
    )


def _first_line(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.strip():
            return f"{type(exc).__name__}: {line.strip()}"
    return type(exc).__name__


def trace(fn: Callable[..., Any], *example_args: Any, name: str | None = None, description: str = "",
          while_trips: int = 1) -> Workload:
    """Trace ``fn(*example_args)`` into a :class:`Workload` of GEMM and conv ops.

    Args:
        fn: Any JAX-traceable function (``jit``-, ``vmap``-, ``grad``-wrapped, with ``scan``,
            ``cond``, ``while_loop``, ...).
        *example_args: Arguments fixing the shapes and dtypes: arrays or, better (nothing is
            computed), pytrees of ``jax.ShapeDtypeStruct``.
        name: The workload's name (default: the function's ``__name__``).
        description: One line for humans.
        while_trips: Assumed trip count of every ``while`` loop (default 1).

    Returns:
        The ops in program order with their run counts, plus the non-matmul primitive counts.

    Raises:
        WorkloadError: if tracing raises (the message's first line is shown), or if the function
            has no matmul or convolution (the primitives it has are listed).
    """
    if isinstance(while_trips, bool) or not isinstance(while_trips, int) or while_trips < 1:
        raise WorkloadError(f"while_trips must be a positive integer, not {while_trips!r}")
    label = name if name is not None else getattr(fn, "__name__", "function")
    try:
        closed = jax.make_jaxpr(fn)(*example_args)
    except WorkloadError:
        raise
    except Exception as exc:  # a user's function may raise anything while tracing
        raise WorkloadError(f"tracing {label} failed: {_first_line(exc)}") from exc
    return trace_jaxpr(closed, name=label, description=description, while_trips=while_trips)
