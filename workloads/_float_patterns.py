"""Float activations and normalisations in a jaxpr -> the vector unit's ops.

A float model written with ``jax.nn`` or plain ``jnp`` spells GELU, SiLU, softmax and its norms
as chains of element-wise primitives (``tanh``, ``erfc``, ``exp``, ``reduce_sum``, ``rsqrt``...).
This module finds those chains by the *pattern of primitives*, not by function names, so a
hand-written softmax or norm is found too, and turns each into one
:class:`~workloads.vector_ops.VectorOp` (the kinds of :mod:`workloads.vector_ops`, with the
parameters the builtins' int8 form uses at the activation scale,
:func:`workloads.vector_params.default_params`).

Steps, on one jaxpr level (:func:`workloads._float_flat.flatten` first inlines ``jit``/``custom_jvp_call``/... calls so
``jax.nn.silu``'s ``jit`` and the user's code around it are one graph):

1. *Anchors*: each ``tanh``, ``erf``/``erfc``, ``logistic``, ``exp``, ``sqrt``/``rsqrt``.
2. *Input* ``X``: walking back from the anchor through cheap primitives (:data:`CHEAP`), the value
   every path to a non-constant source passes through, farthest from the anchor (a residual add
   feeding a norm stays outside: its two inputs are two sources).
3. *Region*: the equations between ``X`` and the anchor, grown forward by every cheap equation
   whose non-constant inputs are all in the region or ``X``; equations none of the region uses
   are dropped again, except the last. Each intermediate must be used only inside the region.
   A constant is a literal, anything computed from literals and ``iota`` alone, or a per-channel
   vector (at most one row's elements: a norm's scale and shift).
4. *Kind* from the region's primitives: ``logistic`` times the value it read -> ``silu`` (``gated``
   when its output's one use is a multiply by another activation of its shape: SwiGLU); a
   ``logistic`` not multiplied by its own input (a bare sigmoid, a sigmoid gate) stays host work,
   named with :data:`SIGMOID`, as the unit has no sigmoid; ``erf``/``erfc``, or ``tanh``
   with a cube -> ``gelu``; ``exp`` + ``reduce_sum`` + ``div`` -> ``softmax`` (a mask applied to
   ``X`` by ``select_n`` or an add of a constant is taken in: ``causal_offset`` 0, the unit's
   mask; a mask selected from the data stays host work, named with that reason: the unit masks
   causally only); ``sqrt``/``rsqrt`` + ``reduce_sum`` -> ``layernorm`` (two or more sums: the mean is
   subtracted) or ``rmsnorm`` (one). Reductions must run along the last axis. Anything else is
   left alone and stays host work.
5. *RoPE* (:mod:`workloads._float_rope`): ``x * cos + rotate(x) * sin`` with position-only tables
   -> ``rope``. *Pools*: ``reduce_window_max``, ``reduce_window_sum`` divided by its window, and a max or mean over
   the two spatial axes of a 4-D value -> ``maxpool``/``avgpool`` (:mod:`workloads._float_pools`).
6. *Residual adds*: an ``add`` of two activations of the output's shape -> ``add``; a ``max`` with
   0 of a value no output stage produced -> ``relu``.
7. *Output stage*: an ``add``/``mul``/``sub`` of a constant, a ``div`` by one, or a clamp
   (``max``/``min`` with a scalar: a ReLU) onto a float matrix op's result whose one use it is (a
   bias, a scale, which quantisation folds into the requantisation) is the output stage's work
   (an integer result's hand-written arithmetic stays the user's), as the ONNX importer's rule
   (:mod:`workloads._onnx_vector`): neither a record nor host work.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accel_spec.errors import WorkloadError
from workloads._eqn_origin import eqn_origin as where
from workloads._float_flat import FlatEqn, _Lit
from workloads._float_graph import _floating, _Graph, _shape, _value
from workloads.vector_ops import VectorOp
from workloads.vector_params import default_params

__all__ = ["Plan", "plan", "DATA_MASK", "NONCAUSAL_MASK", "UNKNOWN_MASK", "SIGMOID"]

#: Why a sigmoid that is not a SiLU's (``x * sigmoid(x)``) stays host work.
SIGMOID = "sigmoid: the vector unit has no sigmoid kind (its silu is x * sigmoid(x))"

#: Why a softmax's mask selected from the data (``jnp.where(mask_input, s, -inf)``) stays host work.
DATA_MASK = "softmax mask from data: the vector unit masks causally only"

#: Primitives a recognised region may contain (element-wise, broadcasts, last-axis reductions).
CHEAP = frozenset({
    "add", "sub", "mul", "div", "neg", "integer_pow", "square", "sqrt", "rsqrt", "exp", "exp2", "tanh", "erf",
    "erfc", "logistic", "max", "min", "reduce_sum", "reduce_max", "broadcast_in_dim", "reshape", "squeeze",
    "expand_dims", "convert_element_type", "stop_gradient", "copy", "copy_p", "select_n", "pow", "abs",
})
_ANCHORS = frozenset({"tanh", "erf", "erfc", "logistic", "exp", "sqrt", "rsqrt"})
_REDUCE = frozenset({"reduce_sum", "reduce_max"})
_MATRIX = frozenset({"dot_general", "conv_general_dilated"})
_AFFINE = frozenset({"add", "sub", "mul"})


@dataclass
class Plan:
    """What the matcher decided for a flattened jaxpr (indices into it)."""

    #: Index of a region's last equation -> the record it becomes.
    emit: dict[int, VectorOp] = field(default_factory=dict)
    #: Equations folded into a record or the output stage (neither counted nor walked).
    consumed: set[int] = field(default_factory=set)
    #: Index of a record's last equation -> the values the record reads (a region's input ``X``, a
    #: gated SiLU's gate, a residual add's two terms): what post-training quantisation stores in
    #: the activation format before the unit (:mod:`workloads._ptq`).
    inputs: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    #: Equation -> the last equation of the record it is folded into (its region's).
    members: dict[int, int] = field(default_factory=dict)
    #: Equations left as host work with a reason the tracer shows with their name (``select_n[...]``).
    reasons: dict[int, str] = field(default_factory=dict)
    #: Equations folded into a float matrix op's output stage (its bias, its scale).
    stage: set[int] = field(default_factory=set)


def _input(g: _Graph, anchor: int, taken: set[int]) -> Any | None:
    """The value every path back from ``anchor`` to a non-constant source passes through (farthest)."""
    if not g.flat[anchor].ins:
        return None
    cur = g.flat[anchor].ins[0]
    while True:
        i = g.producer.get(cur)
        if i is None or i in taken or g.flat[i].prim not in CHEAP or _stage_value(g, cur):
            return cur
        srcs = [u for u in g.flat[i].ins if not g.constant(u)]
        if not srcs:
            return None
        # The value all non-constant inputs of this equation lead back to (their common ancestor).
        common = _common(g, srcs)
        if common is None:
            return cur
        cur = common


def _stage_value(g: _Graph, v: Any) -> bool:
    """Whether ``v`` is a float matrix op's result, or a bias or scale applied to one whose only use
    it is (the output stage's work: a region starts after it)."""
    i = g.producer.get(v)
    if i is None or not _floating(v):
        return False
    fe = g.flat[i]
    if fe.prim in _MATRIX:
        return True
    data = _scaled(g, fe)
    return data is not None and len(g.users.get(data, [])) == 1 and _stage_value(g, data)


def _scaled(g: _Graph, fe: FlatEqn) -> Any | None:
    """The one data operand of an ``add``/``sub``/``mul`` of a per-channel constant, or of a ``div``
    by one (a bias or a scale); ``None`` for any other equation."""
    if fe.prim not in _AFFINE | {"div", "max", "min"} or len(fe.ins) != 2 or not fe.outs:
        return None
    if fe.prim in ("max", "min") and not any(g.constant(u) and not _shape(u) for u in fe.ins):
        return None  # a clamp (a ReLU) is by a scalar constant
    out = _shape(fe.outs[0])
    row = out[-1] if out else 1
    data = [u for u in fe.ins if not g.param_like(u, row, out)]
    if len(data) != 1 or (fe.prim == "div" and data[0] is not fe.ins[0]):
        return None
    return data[0]


def _common(g: _Graph, values: list[Any]) -> Any | None:
    """The nearest value every one of ``values`` is, or is computed from through cheap equations only."""
    cones = [_cone(g, v) for v in values]
    shared = set.intersection(*cones)
    if not shared:
        return None
    # Nearest: the shared value produced last (values without a producer come first).
    return max(shared, key=lambda v: g.producer.get(v, -1))


def _cone(g: _Graph, v: Any) -> set[Any]:
    seen, todo = set(), [v]
    while todo:
        cur = todo.pop()
        if cur in seen or g.constant(cur):
            continue
        seen.add(cur)
        i = g.producer.get(cur)
        if i is not None and g.flat[i].prim in CHEAP:
            todo.extend(g.flat[i].ins)
    return seen


def _region(g: _Graph, x: Any, anchor: int, taken: set[int], row: int) -> list[int] | None:
    start = g.producer.get(x, -1) + 1
    members: set[int] = set()
    values: set[Any] = {x}
    for i in range(start, len(g.flat)):
        fe = g.flat[i]
        if i in taken or fe.prim not in CHEAP:
            if i >= anchor:
                break
            continue
        live = [u for u in fe.ins if not g.param_like(u, row) or u in values]
        if live and all(u in values for u in live):
            members.add(i)
            values.update(fe.outs)
    if anchor not in members:
        return None
    after = {anchor}  # the anchor and what it feeds within the region: the last of these is the output
    for i in sorted(members):
        if i > anchor and any(u in g.flat[j].outs for j in after for u in g.flat[i].ins):
            after.add(i)
    members = {i for i in members if i <= max(after)}
    changed = True
    while changed:  # drop what nothing in the region uses, except the last
        changed = False
        last = max(members)
        for i in sorted(members):
            if i != last and not any(u in members for v in g.flat[i].outs for u in g.users.get(v, ())):
                members.discard(i)
                changed = True
    last = max(members)
    for i in members:  # intermediates must not escape
        if i != last and any(u not in members for v in g.flat[i].outs for u in g.users.get(v, ())):
            return None
    return sorted(members)


def _times_input(g: _Graph, region: list[int], anchor: int) -> bool:
    """Whether ``region`` multiplies what its ``anchor`` (a ``logistic``) computed by the value the
    anchor read (``x * sigmoid(x)``, SiLU), not only by constants or by other data."""
    after = set(g.flat[anchor].outs)  # values computed from the sigmoid within the region
    for i in region:
        if i > anchor and any(u in after for u in g.flat[i].ins):
            after.update(g.flat[i].outs)
    for i in region:
        fe = g.flat[i]
        if fe.prim == "mul" and len(fe.ins) == 2:
            ins = [u in after for u in fe.ins]
            if any(ins) and not all(ins) and not any(g.constant(u) for u in fe.ins):
                return True
    return False


def _reduces_last(g: _Graph, region: list[int]) -> bool:
    for i in region:
        fe = g.flat[i]
        if fe.prim in _REDUCE:
            rank = len(_shape(fe.eqn.invars[0]))
            if tuple(fe.eqn.params.get("axes", ())) != (rank - 1,):
                return False
    return True


def _kind(prims: Counter[str]) -> str | None:
    if prims["logistic"]:
        return "silu"
    if prims["erf"] or prims["erfc"] or (prims["tanh"] and (prims["integer_pow"] or prims["pow"])):
        return "gelu"
    if prims["exp"] and prims["reduce_sum"] and prims["div"]:
        return "softmax"
    if (prims["sqrt"] or prims["rsqrt"]) and prims["reduce_sum"]:
        return "layernorm" if prims["reduce_sum"] >= 2 else "rmsnorm"
    return None


def _eps(g: _Graph, region: list[int]) -> float:
    for i in region:
        fe = g.flat[i]
        if fe.prim == "add":
            for u in fe.ins:
                val = getattr(u, "value", None)
                if isinstance(u, _Lit) and val is not None and getattr(val, "shape", ()) == ():
                    f = float(val)
                    if 0 < f < 1e-2:
                        return f
    return 1e-5


def _mask(g: _Graph, x: Any, taken: set[int]) -> list[int]:
    """The equations applying a constant mask to ``x`` (``select_n``/``add`` of a constant), with
    the mask's own constant-building equations; empty when ``x`` is not masked."""
    i = g.producer.get(x)
    if i is None or i in taken or g.flat[i].prim not in ("select_n", "add"):
        return []
    fe = g.flat[i]
    data = [u for u in fe.ins if not g.constant(u)]
    if len(data) != 1 or len(g.users.get(x, [])) < 1:
        return []
    built: list[int] = []
    todo = [u for u in fe.ins if g.constant(u)]
    while todo:
        j = g.producer.get(todo.pop())
        if j is not None and j not in built:
            built.append(j)
            todo.extend(g.flat[j].ins)
    return [i, *built]


#: Why a constant softmax mask that is not causal stays host work (a sliding window, a block pattern).
NONCAUSAL_MASK = "softmax mask not causal (a sliding window or another pattern): the vector unit masks causally only"
#: Why a constant softmax mask whose values the tracer cannot compute stays host work.
UNKNOWN_MASK = "softmax mask of values not known when tracing: the vector unit masks causally only"
#: An additive mask's entries at or below this are masked out (-inf, finfo.min, -1e9, -1e4...).
_MASKED_BELOW = -1e3


def _mask_offset(g: _Graph, i: int) -> int | str:
    """The ``causal_offset`` of the constant mask equation ``i`` applies (query ``q`` keeps keys
    ``k <= q + offset``; -1: it masks nothing), or why the unit cannot apply it."""
    import numpy as np

    fe = g.flat[i]
    memo: dict[Any, Any] = {}
    data = [n for n, u in enumerate(fe.ins) if not g.constant(u)]
    out = _shape(fe.outs[0])
    if fe.prim == "select_n":
        pred = _value(g, fe.ins[0], memo)
        if pred is None or len(fe.ins) != 3 or data[0] == 0:
            return UNKNOWN_MASK
        kept = pred.astype(bool) if data[0] == 2 else ~pred.astype(bool)
    else:  # an additive mask: 0 keeps, a large negative masks
        other = _value(g, fe.ins[1 - data[0]], memo)
        if other is None:
            return UNKNOWN_MASK
        if np.any((other > _MASKED_BELOW) & (other != 0)):
            return NONCAUSAL_MASK  # a bias, not a mask
        kept = other > _MASKED_BELOW
    if len(out) < 2:
        return NONCAUSAL_MASK
    rows = np.broadcast_to(kept, out).reshape(-1, out[-2], out[-1])
    if not np.all(rows == rows[:1]):
        return NONCAUSAL_MASK  # differs between heads or sequences
    grid = rows[0]
    if grid.all():  # one query seeing every key is a decode step's causal mask (offset: the cached keys)
        return grid.shape[1] - 1 if grid.shape[0] == 1 else -1
    offset = int(grid[0].sum()) - 1
    q, k = np.indices(grid.shape)
    return offset if offset >= 0 and np.array_equal(grid, k <= q + offset) else NONCAUSAL_MASK


def _const_feeders(g: _Graph, region: set[int], taken: set[int]) -> set[int]:
    """Equations building constants (a ``jnp.tril`` mask) used by ``region`` and nothing else."""
    fed: set[int] = set()
    todo = [u for i in region for u in g.flat[i].ins if g.constant(u)]
    while todo:
        j = g.producer.get(todo.pop())
        if j is None or j in fed or j in region or j in taken:
            continue
        users = {u for v in g.flat[j].outs for u in g.users.get(v, ())}
        if users <= region | fed:
            fed.add(j)
            todo.extend(g.flat[j].ins)
    return fed


def _origin(fe: FlatEqn, kind: str) -> str:
    return where(fe.eqn).replace(fe.prim, f"{kind} ({fe.prim})", 1)


def plan(flat: list[FlatEqn], eligible: Callable[[Any], bool], label: Callable[[Any], str]) -> Plan:
    """Match the float patterns in ``flat``.

    Args:
        flat: What :func:`flatten` gave.
        eligible: Whether an equation may be taken (not the output stage's).
        label: The equation's ``jax.named_scope`` path ("" when none).
    """
    g = _Graph(flat)
    result = Plan()
    taken = {i for i, fe in enumerate(flat) if not eligible(fe.eqn)}
    for a, fe in enumerate(flat):
        if fe.prim not in _ANCHORS or a in taken or a in result.consumed:
            continue
        x = _input(g, a, taken | result.consumed | set(result.emit))
        shape = _shape(x) if x is not None else ()
        if not shape:
            continue
        row = shape[-1]
        region = _region(g, x, a, taken | result.consumed, row)
        if region is None or not _reduces_last(g, region):
            continue
        kind = _kind(Counter(flat[i].prim for i in region))
        if kind is None:
            continue
        if kind == "silu" and not _times_input(g, region, a):
            result.reasons[a] = SIGMOID  # a bare sigmoid (or one gating another value): not the unit's SiLU
            continue
        last = region[-1]
        x_read = x
        params: dict[str, int] = {}
        extra: list[int] = []
        if kind == "silu":
            params["gated"] = 0
            users = [u for v in flat[last].outs for u in g.users.get(v, ())]
            if len(users) == 1 and flat[users[0]].prim == "mul" and users[0] not in taken:
                other = [u for u in flat[users[0]].ins if u not in flat[last].outs]
                if len(other) == 1 and _shape(other[0]) == shape and not g.constant(other[0]):
                    params["gated"] = 1
                    extra.append(users[0])
                    last = users[0]
        elif kind == "softmax":
            masked = _mask(g, x, taken | result.consumed)
            offset = _mask_offset(g, masked[0]) if masked else -1
            if isinstance(offset, str):  # a constant mask the unit cannot apply: host work, with the reason
                result.reasons[masked[0]] = offset
                masked, offset = [], -1
            extra.extend(masked)
            if masked:  # the unit reads the scores before the mask (the mask is its own)
                x_read = next(u for u in flat[masked[0]].ins if not g.constant(u))
            elif (j := g.producer.get(x)) is not None and flat[j].prim == "select_n" and j not in result.reasons:
                result.reasons[j] = DATA_MASK  # the mask depends on the inputs: the unit masks causally only
            inner = [i for i in region if flat[i].prim == "select_n" and g.constant(flat[i].ins[0])]
            if not masked and inner:  # a constant mask among the softmax's own equations
                offset = _mask_offset(g, inner[0])
                if isinstance(offset, str):  # the unit cannot apply it: host work, the unit reads its result
                    result.reasons[inner[0]] = offset
                    region.remove(inner[0])
                    x_read, offset = flat[inner[0]].outs[0], -1
            params.update(_params(kind, row))
            params["causal_offset"] = offset
        if kind != "softmax":
            params = {**_params(kind, row, _eps(g, region)), **params}
        fo = flat[last]
        out_shape = _shape(fo.outs[0]) if fo.outs else shape
        scope = label(flat[a].eqn)
        axis = len(shape) - 1 if kind in ("layernorm", "rmsnorm", "softmax") else None
        result.emit[last] = VectorOp(kind=kind, shape=shape, out_shape=out_shape, axis=axis,
                                     params=tuple(params.items()), name=f"{scope}/{kind}" if scope else kind,
                                     origin=_origin(flat[a], kind))
        folded = set(region) | set(extra) | _const_feeders(g, set(region) | set(extra), taken)
        result.consumed.update(folded)
        result.consumed.discard(last)
        gate = [u for u in flat[last].ins if u not in flat[region[-1]].outs] if last != region[-1] else []
        result.inputs[last] = (x_read, *gate)
        result.members.update({i: last for i in folded | {last}})
    from workloads._float_pools import find_pools  # noqa: PLC0415  # they read this module's graph
    from workloads._float_rope import find_ropes  # noqa: PLC0415

    find_ropes(g, result, taken, label, _stage_value)
    find_pools(g, result, taken, label)
    _residuals_and_stages(g, result, taken, label)
    return result


def _params(kind: str, row: int, eps: float = 1e-5) -> dict[str, int]:
    try:
        return default_params(kind, row, eps)
    except WorkloadError:  # a row too long for the normaliser: no parameters (evaluate names it host work)
        return {}


def _is_zero(ins: tuple[Any, ...]) -> bool:
    return any(isinstance(u, _Lit) and getattr(u, "value", None) is not None and getattr(u.value, "shape", ()) == ()
               and float(u.value) == 0.0 for u in ins)


def _residuals_and_stages(g: _Graph, result: Plan, taken: set[int], label: Callable[[Any], str]) -> None:
    stage: set[Any] = set()  # values a matrix op's output stage produces
    for i, fe in enumerate(g.flat):
        if i in taken or i in result.consumed or i in result.emit:
            continue
        if fe.prim in _MATRIX:
            stage.update(v for v in fe.outs if _floating(v))  # an integer result's arithmetic is the user's
            continue
        scaled = _scaled(g, fe)
        if scaled is not None and scaled in stage and len(g.users.get(scaled, [])) == 1:
            result.consumed.add(i)  # a bias or scale: the output stage's
            result.consumed.update(_const_feeders(g, {i}, taken | result.consumed))  # its bound's conversion
            result.stage.add(i)
            stage.update(fe.outs)
            continue
        if fe.prim == "max" and scaled is not None and _is_zero(fe.ins) and _floating(fe.outs[0]):
            out = _shape(fe.outs[0])  # a ReLU on a value no output stage produced
            scope = label(fe.eqn)
            result.emit[i] = VectorOp(kind="relu", shape=out, name=f"{scope}/relu" if scope else "relu",
                                      origin=_origin(fe, "relu"))
            result.inputs[i] = (scaled,)
            result.members[i] = i
            continue
        if fe.prim not in _AFFINE or len(fe.ins) != 2 or not fe.outs:
            continue
        out = _shape(fe.outs[0])
        row = out[-1] if out else 1
        data = [u for u in fe.ins if not g.param_like(u, row, out)]
        if fe.prim == "add" and len(data) == 2 and all(_shape(u) == out for u in data) and out:
            scope = label(fe.eqn)
            result.emit[i] = VectorOp(kind="add", shape=out, params=tuple(_params("add", row).items()),
                                      name=f"{scope}/add" if scope else "add", origin=_origin(fe, "add"))
            result.inputs[i] = tuple(data)
            result.members[i] = i
