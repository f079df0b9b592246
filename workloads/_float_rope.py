"""Float rotary position embeddings in a jaxpr -> the vector unit's ``rope`` records (by pattern).

RoPE rotates pairs of a vector's elements by angles that depend on the position only:
``x * cos + rotate(x) * sin``, whichever way the pairs are formed (LLaMA/Hugging Face's halves,
``concatenate([-x2, x1])``; Meta's interleaved pairs, a reshape to ``(..., d/2, 2)``). Found on the
graph of :mod:`workloads._float_patterns`, not by name:

* the output is an ``add`` or ``sub`` (or the ``concatenate``/``reshape`` joining interleaved
  pairs back) whose cone back, through ``mul``, ``neg``, ``add``, ``sub`` and layout primitives
  (slices, concatenations, reshapes, broadcasts), reaches exactly one value ``X`` that depends on
  the function's inputs (the first such equation in program order wins);
* every ``mul`` in that cone multiplies by a *static* value (one that depends on no input: built
  from literals, ``iota`` and constants), and those values are computed with both ``cos`` and
  ``sin``;
* the output has ``X``'s elements, and no intermediate is used outside the cone.

The record is ``rope`` on the output's shape; its ``theta`` is the scalar base of a ``pow`` in the
tables' computation (10000 when there is none) and ``start`` a scalar added to the positions'
``iota`` (0 when none). The tables' own computation (``iota``, ``pow``, ``cos``, ``sin``...), when
nothing else uses it, goes with the record: the unit holds its cos/sin tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from workloads._eqn_origin import eqn_origin as where
from workloads.vector_ops import VectorOp

__all__ = ["find_ropes"]

_WALK = frozenset({"mul", "neg", "add", "sub", "slice", "concatenate", "stack", "reshape", "broadcast_in_dim",
                   "squeeze", "expand_dims", "convert_element_type", "copy", "copy_p", "transpose", "rev"})
_MAX_REGION = 64
#: Equations that may end a RoPE: the rotation's sum, or the layout joining interleaved pairs.
_OUTPUTS = ("add", "sub", "concatenate", "stack", "reshape")


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in getattr(getattr(v, "aval", None), "shape", ()) or ())


class _Static:
    """Which values depend on no input of the function (memoised)."""

    def __init__(self, g: Any) -> None:
        self.g = g
        self.memo: dict[Any, bool] = {}

    def __call__(self, v: Any) -> bool:
        if not hasattr(v, "aval"):
            return True  # a literal or an inner constant
        if v in self.memo:
            return self.memo[v]
        # Iterative post-order (a deep network's graph is deeper than Python's recursion limit); each
        # value is expanded once, so a graph of many shared values (a residual stream) stays linear.
        todo: list[tuple[Any, bool]] = [(v, False)]
        while todo:
            cur, expanded = todo.pop()
            if cur in self.memo:
                continue
            i = self.g.producer.get(cur)
            if i is None:
                self.memo[cur] = False
            elif expanded:
                self.memo[cur] = all(self.memo.get(u, True) for u in self.g.flat[i].ins)
            else:
                todo.append((cur, True))
                todo.extend((u, False) for u in self.g.flat[i].ins if hasattr(u, "aval") and u not in self.memo)
        return self.memo[v]

    def cone(self, v: Any) -> set[int]:
        """The equations computing static ``v``."""
        seen: set[int] = set()
        todo = [v]
        while todo:
            i = self.g.producer.get(todo.pop())
            if i is not None and i not in seen:
                seen.add(i)
                todo.extend(self.g.flat[i].ins)
        return seen


def _scalar(u: Any) -> float | None:
    val = getattr(u, "value", None)
    try:
        return float(val) if val is not None and getattr(val, "shape", ()) == () else None
    except (TypeError, ValueError):
        return None


def _params(g: Any, tables: set[int]) -> tuple[tuple[str, int], ...]:
    theta, start = 10000, 0
    for i in sorted(tables):
        fe = g.flat[i]
        if fe.prim == "pow" and (base := _scalar(fe.ins[0])) is not None and base > 1:
            theta = round(base)
        if fe.prim == "add":
            iotas = [u for u in fe.ins if (j := g.producer.get(u)) is not None and g.flat[j].prim == "iota"]
            other = [_scalar(u) for u in fe.ins if u not in iotas]
            if iotas and other and other[0] is not None:
                start = round(other[0])
    return (("start", start), ("theta", theta))


def _match(g: Any, out: int, static: _Static, blocked: set[int],
           stage: Callable[[Any, Any], bool]) -> tuple[Any, set[int], set[int]] | None:
    """``(X, region, table equations)`` of a RoPE ending at equation ``out``."""
    region: set[int] = set()
    sources: set[Any] = set()
    tables: set[int] = set()
    todo = [out]
    while todo:
        i = todo.pop()
        if i in region:
            continue
        fe = g.flat[i]
        region.add(i)
        if len(region) > _MAX_REGION:
            return None
        if fe.prim == "mul":
            fixed = [u for u in fe.ins if static(u)]
            if len(fixed) != 1:
                return None
            tables |= static.cone(fixed[0])
        for u in fe.ins:
            if static(u):
                continue
            j = g.producer.get(u)
            # a matrix op's result with its bias or scale (the output stage's) is where the rotation starts
            if j is None or j in blocked or g.flat[j].prim not in _WALK or stage(g, u):
                sources.add(u)
            else:
                todo.append(j)
    prims = {g.flat[i].prim for i in tables}
    if len(sources) != 1 or not {"cos", "sin"} <= prims:
        return None
    x = next(iter(sources))
    if math.prod(_shape(x)) != math.prod(_shape(g.flat[out].outs[0])) or \
            sum(g.flat[i].prim == "mul" for i in region) < 2:
        return None
    for i in region - {out}:  # intermediates must not escape
        if any(u not in region for v in g.flat[i].outs for u in g.users.get(v, ())):
            return None
    return x, region, tables


def _feeders(g: Any, tables: set[int], used_by: set[int]) -> set[int]:
    """The table equations nothing but ``used_by`` (and each other) uses."""
    fed = set(tables)
    changed = True
    while changed:
        changed = False
        for i in sorted(fed):
            users = {u for v in g.flat[i].outs for u in g.users.get(v, ())}
            if not users <= fed | used_by:
                fed.discard(i)
                changed = True
    return fed


def find_ropes(g: Any, result: Any, taken: set[int], label: Callable[[Any], str],
               stage: Callable[[Any, Any], bool]) -> None:
    """Add the RoPEs of graph ``g`` to the plan ``result`` (module docstring); ``stage(g, v)``: whether
    ``v`` is a matrix op's result with its output stage's bias or scale (where a rotation starts;
    ``workloads._float_patterns`` passes its own rule, as it passes its graph)."""
    if not {"cos", "sin"} <= {fe.prim for fe in g.flat}:
        return
    static = _Static(g)
    regions: set[int] = set()
    tables: dict[int, set[int]] = {}  # each record's table equations
    for i, fe in enumerate(g.flat):
        blocked = taken | result.consumed | set(result.emit)
        if fe.prim not in _OUTPUTS or i in blocked or not fe.outs or static(fe.outs[0]):
            continue
        if getattr(getattr(getattr(fe.outs[0], "aval", None), "dtype", None), "kind", "") != "f":
            continue
        found = _match(g, i, static, blocked, stage)
        if found is None:
            continue
        x, region, table = found
        while fe.prim in ("stack", "concatenate"):  # interleaved pairs: end at the reshape back to vectors
            users = [u for v in fe.outs for u in g.users.get(v, ())]
            if len(users) != 1 or g.flat[users[0]].prim != "reshape" or users[0] in blocked:
                break
            i, fe = users[0], g.flat[users[0]]
            region.add(i)
        tables[i] = table
        regions |= region
        scope = label(fe.eqn)
        shape = _shape(fe.outs[0])  # the rotated view (a projection's result reshaped to its heads)
        result.emit[i] = VectorOp(kind="rope", shape=shape, out_shape=shape, params=_params(g, tables[i]),
                                  name=f"{scope}/rope" if scope else "rope",
                                  origin=where(fe.eqn).replace(fe.prim, f"rope ({fe.prim})", 1))
        result.consumed.update(region - {i})
        result.inputs[i] = (x,)
        result.members.update({j: i for j in region})
    fed = _feeders(g, set().union(*tables.values()) if tables else set(), regions)
    for last, eqns in tables.items():  # the tables go with the first record using them
        for j in sorted(eqns & fed):
            if j not in result.members:
                result.members[j] = last
                result.consumed.add(j)
