"""The graph of a flattened jaxpr (``workloads._float_flat``): who produces and who uses each
value, which values are constants and their values, for the float pattern matcher
(``workloads._float_patterns``) and the float output stage (``workloads._float_requant``).
"""

from __future__ import annotations

import math
from typing import Any

from workloads._float_flat import FlatEqn, _Lit

#: Primitives that only re-shape one operand (a per-channel weight broadcast along a map's axes).
_RESHAPES = frozenset({"reshape", "broadcast_in_dim", "expand_dims", "convert_element_type"})
#: Primitives that build constants (a mask from ``jnp.tril``) from nothing.
_SOURCES = frozenset({"iota", "broadcast_in_dim", "ge", "gt", "le", "lt", "eq", "ne", "and", "or", "not",
                      "select_n", "add", "sub", "convert_element_type"})


def _floating(v: Any) -> bool:
    dtype = getattr(getattr(v, "aval", None), "dtype", None)
    return dtype is not None and getattr(dtype, "kind", "") == "f"


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in getattr(getattr(v, "aval", None), "shape", ()) or ())


class _Graph:
    def __init__(self, flat: list[FlatEqn]) -> None:
        self.flat = flat
        self.producer: dict[Any, int] = {}
        self.users: dict[Any, list[int]] = {}
        for i, fe in enumerate(flat):
            for v in fe.outs:
                self.producer[v] = i
            for v in fe.ins:
                self.users.setdefault(v, []).append(i)
        self._const: dict[Any, bool] = {}

    def constant(self, v: Any) -> bool:
        """Literal, inner constant, or computed from constants and ``iota`` alone."""
        if isinstance(v, _Lit):
            return True
        if v in self._const:
            return self._const[v]
        self._const[v] = False
        i = self.producer.get(v)
        ok = (i is not None and self.flat[i].prim in _SOURCES | {"iota"}
              and all(self.constant(u) for u in self.flat[i].ins))
        self._const[v] = ok
        return ok

    def param_like(self, v: Any, row: int, out: tuple[int, ...] | None = None) -> bool:
        """A constant, a per-channel vector (at most ``row`` elements), or an argument of at most one
        axis's elements broadcast along the others (an NCHW bias or scale, one value per channel)."""
        if self.constant(v) or self._broadcast_vector(v):
            return True
        if out is not None and _shape(v) == out and math.prod(out) == row and self.producer.get(v) is not None:
            return False  # one token's activations computed here (a decode step's (1, 1, d)): data
        return math.prod(_shape(v)) <= row

    def _broadcast_vector(self, v: Any) -> bool:
        out = _shape(v)
        cur, moved = v, False
        while (i := self.producer.get(cur)) is not None and self.flat[i].prim in _RESHAPES and self.flat[i].ins:
            moved = True
            cur = self.flat[i].ins[0]
        return moved and bool(out) and math.prod(_shape(cur)) <= max(out) and self.producer.get(cur) is None


def _value(g: _Graph, v: Any, memo: dict[Any, Any]) -> Any:
    """The numpy value of constant ``v`` (its equations evaluated), ``None`` when not known."""
    import numpy as np

    if isinstance(v, _Lit):
        return None if v.value is None else np.asarray(v.value)
    if v in memo:
        return memo[v]
    memo[v] = None
    i = g.producer.get(v)
    if i is not None:
        fe = g.flat[i]
        vals = [_value(g, u, memo) for u in fe.ins]
        if all(x is not None for x in vals):
            try:
                out = fe.eqn.primitive.bind(*vals, **fe.eqn.params)
            except Exception:  # noqa: BLE001  # a primitive that does not run eagerly: unknown
                out = None
            if out is not None:
                outs = out if fe.eqn.primitive.multiple_results else [out]
                for o, r in zip(fe.outs, outs, strict=False):
                    memo[o] = np.asarray(r)
    return memo[v]
