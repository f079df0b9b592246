"""A float model's matrix ops recorded as the int8 builtins record theirs: requantised and chained.

The int8 builtins requantise every matmul and conv (:func:`workloads._requant.output_stage`), so
each op record carries a :class:`~workloads.ops.Requant` and, where its ``A`` is the previous op's
requantised output with nothing in between, ``a_from_previous``. A float model (a JAX function on
float arrays, a PyTorch module lowered by :mod:`workloads._torch_trace`) is run by the chip after
post-training quantisation (:mod:`workloads._ptq`): each float matrix op's output stage applies
the scales, its bias or scale (the equations the matcher gives the output stage,
:mod:`workloads._float_patterns` step 7) and a clamp, and writes activation codes. This module
gives the tracer those records:

* *Output stage.* A float matrix op's chain: the op, then each output-stage equation that is the
  one use of the chain's last value (a bias add, a batch norm's scale and shift, a ``max``/``min``
  with a scalar).
* *Activation.* The chain's clamps after its last affine equation: ``max(x, 0)`` is a ReLU,
  ``max(x, 0)`` and ``min(x, 6)`` a ReLU6 (the output stage's clamps,
  :data:`workloads._requant.ACTIVATIONS`); any other clamp, or a clamp before an affine
  equation, leaves the stage without a fused activation.
* *Requant.* :func:`workloads._requant.derived_requant` of the op's reduction length and
  activation: the parameters the int8 builtins use, from the assumed activation RMS (a model
  traced without data -- on ``meta``, or from ``jax.ShapeDtypeStruct`` -- has no calibration).
* *Chaining.* ``a_from_previous`` when the op's ``A`` is the very value the previous matrix op's
  chain ends in (a reshape, a residual add or a vector op in between makes a new value, as for
  the builtins).
* *Order.* The records follow the program, except that a float matrix op whose chain's result is
  read only by a residual ``add`` record, with other matrix ops between the two, and whose ``A`` is
  not the previous matrix op's chain's result (moving it would break that chain), is recorded just
  before that add: PyTorch's ResNet block computes its downsample first, the builtin (and the
  chip's one-program conv network, which takes a downsample as the op before its block's add)
  last. Moving an op later, to just before the one equation that reads its chain, keeps every
  value computed before it is read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from workloads._float_flat import FlatEqn
from workloads._float_graph import _Graph, _value
from workloads._float_patterns import Plan
from workloads._requant import ACTIVATIONS, derived_requant
from workloads.ops import Conv2d, Gemm, Op

__all__ = ["FloatStages"]

_MATRIX = frozenset({"dot_general", "conv_general_dilated"})
_CLAMPS = frozenset({"max", "min"})


def _floating(v: Any) -> bool:
    dtype = getattr(getattr(v, "aval", None), "dtype", None)
    return dtype is not None and getattr(dtype, "kind", "") == "f"


def _scalar(graph: _Graph, u: Any) -> float | None:
    """The value of a scalar constant operand (a literal, or one computed from literals: ``jnp.clip``
    converts its bounds), else ``None``."""
    value = _value(graph, u, {}) if graph.constant(u) else None
    if value is None or np.ndim(value) != 0:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _reduction(op: Op) -> int:
    """The op's reduction length (a conv's ``kh * kw * c_in / groups``)."""
    return op.to_gemm().k if isinstance(op, Conv2d) else op.k


class FloatStages:
    """The output stages of a flattened jaxpr's float matrix ops (module docstring).

    Args:
        flat: The flattened jaxpr (:func:`workloads._float_flat.flatten`).
        found: What the matcher found in it.
    """

    def __init__(self, flat: Sequence[FlatEqn], found: Plan) -> None:
        self.flat, self.found = flat, found
        self.graph = _Graph(list(flat))
        self.users: dict[Any, list[int]] = {}
        for i, fe in enumerate(flat):
            for v in fe.ins:
                self.users.setdefault(v, []).append(i)
        self.chains: dict[int, list[int]] = {
            i: self._chain(i) for i, fe in enumerate(flat)
            if fe.prim in _MATRIX and fe.outs and _floating(fe.outs[0])}
        self._last_end: Any = None

    def _chain(self, m: int) -> list[int]:
        chain = [m]
        while True:
            outs = self.flat[chain[-1]].outs
            users = self.users.get(outs[0], []) if outs else []
            if len(users) != 1 or users[0] not in self.found.stage:
                return chain
            chain.append(users[0])

    def _end(self, m: int) -> Any:
        """The value the chain of matrix op ``m`` ends in (what its output stage writes)."""
        return self.flat[self.chains[m][-1]].outs[0]

    def activation(self, m: int) -> str | None:
        """The fused activation of matrix op ``m``'s output stage (``None``: none the stage clamps)."""
        lo = hi = None
        for i in self.chains[m][1:]:
            fe = self.flat[i]
            if fe.prim not in _CLAMPS:
                if lo is not None or hi is not None:
                    return None  # a clamp before an affine equation: not the stage's final clamp
                continue
            bound = next((b for u in fe.ins if (b := _scalar(self.graph, u)) is not None), None)
            if fe.prim == "max":
                lo = bound if lo is None or bound is None else max(lo, bound)
            else:
                hi = bound if hi is None or bound is None else min(hi, bound)
        if lo is None and hi is None:
            return None
        if lo == 0.0 and hi is None:
            return "relu"
        if lo == 0.0 and hi == 6.0:
            return "relu6"
        return None

    def order(self) -> list[int]:
        """The indices of the flattened jaxpr in recording order (module docstring, *Order*)."""
        before: dict[int, list[int]] = {}
        moved: set[int] = set()
        matrix = sorted(self.chains)
        for n, (m, chain) in enumerate(sorted(self.chains.items())):
            users = self.users.get(self._end(m), [])
            if len(users) != 1 or (n and self.flat[m].ins[0] is self._end(matrix[n - 1])):
                continue  # read by more than one equation, or chained to the op before it: it stays
            add = users[0]
            record = self.found.emit.get(add)
            if record is None or record.kind != "add" or self.found.members.get(add) != add:
                continue
            if any(chain[-1] < j < add for j in matrix):
                before.setdefault(add, []).extend(chain)
                moved.update(chain)
        order: list[int] = []
        for i in range(len(self.flat)):
            order.extend(sorted(before.get(i, ())))
            if i not in moved:
                order.append(i)
        return order

    def record(self, m: int, op: Op | None) -> Op | None:
        """``op`` (the record of matrix op ``m``, in recording order) with its float output stage's
        :class:`~workloads.ops.Requant` and ``a_from_previous``; an integer op as it is."""
        if m not in self.chains or not isinstance(op, (Gemm, Conv2d)):
            self.forget()
            return op
        act = self.activation(m)
        chained = self._last_end is not None and self.flat[m].ins[0] is self._last_end
        self._last_end = self._end(m)
        rq = derived_requant(_reduction(op), act if act in ACTIVATIONS else None)
        return dataclasses.replace(op, requant=rq, a_from_previous=chained)

    def forget(self) -> None:
        """No chaining across what was recorded since the last matrix op (an integer op, a call)."""
        self._last_end = None
