"""Float pooling in a jaxpr -> the vector unit's ``maxpool``/``avgpool`` records (by pattern).

Found on the graph of :mod:`workloads._float_patterns` (after its regions), whatever wrote them
(``lax.reduce_window``, Flax's ``max_pool``/``avg_pool``, ``jnp.mean``/``jnp.max`` over the map):

* ``reduce_window_max`` on a 4-D value -> ``maxpool`` (so is a generic ``reduce_window`` of ``max`` from
  ``-inf``, and one of ``add`` from 0 is a ``reduce_window_sum``); ``reduce_window_sum`` whose only use is a
  division by (or a multiply by the inverse of) the window's size -> ``avgpool`` (the unit divides
  by the whole window, padding counted: PyTorch's ``count_include_pad``);
* ``reduce_max`` / ``reduce_sum`` (then the division by ``H * W``) over the two spatial axes of a
  4-D value -> a global ``maxpool``/``avgpool``, its window the whole map.

The two spatial axes are those the window spans, strides or pads; every other axis must have
window 1, stride 1 and no padding. Axes 1, 2 are NHWC, axes 2, 3 NCHW (the record carries the
NHWC shape: the layout is the DMA's). Dilation, asymmetric padding, a divisor other than the
window's size (``count_include_pad=False``) or three spatial axes match nothing and stay host
work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from workloads._eqn_origin import eqn_origin as where
from workloads.vector_ops import VectorOp

__all__ = ["find_pools"]

_WINDOW = {"reduce_window_max": "maxpool", "reduce_window_sum": "avgpool"}
_GLOBAL = {"reduce_max": "maxpool", "reduce_sum": "avgpool"}


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in getattr(getattr(v, "aval", None), "shape", ()) or ())


def _scalar(u: Any) -> float | None:
    """The value of a scalar literal operand (``None`` when ``u`` is not one)."""
    val = getattr(u, "value", None)
    try:
        return float(val) if val is not None and math.prod(getattr(val, "shape", ())) == 1 else None
    except (TypeError, ValueError):
        return None


def _spatial(window: tuple[int, ...], strides: tuple[int, ...],
             pads: tuple[tuple[int, int], ...]) -> tuple[int, int] | None:
    moving = {a for a in range(4) if window[a] != 1 or strides[a] != 1 or tuple(pads[a]) != (0, 0)}
    for axes in ((1, 2), (2, 3)):
        if moving <= set(axes):
            return axes
    return None


def _nhwc(shape: tuple[int, ...], axes: tuple[int, int]) -> tuple[int, ...]:
    return shape if axes == (1, 2) else (shape[0], shape[2], shape[3], shape[1])


def _divided(g: Any, i: int, size: int) -> int | None:
    """The equation dividing equation ``i``'s result by ``size`` (its only use), else ``None``."""
    users = [u for v in g.flat[i].outs for u in g.users.get(v, ())]
    if len(users) != 1:
        return None
    fe = g.flat[users[0]]
    other = [u for u in fe.ins if u not in g.flat[i].outs]
    value = _scalar(other[0]) if len(other) == 1 else None
    if value is None:
        return None
    if fe.prim == "div" and fe.ins[1] is other[0] and math.isclose(value, size, rel_tol=1e-6):
        return users[0]
    if fe.prim == "mul" and math.isclose(value * size, 1.0, rel_tol=1e-6):
        return users[0]
    return None


def _params(window: tuple[int, int], stride: tuple[int, int], pad: tuple[int, int]) -> tuple[tuple[str, int], ...]:
    return (("window_h", window[0]), ("window_w", window[1]), ("stride_h", stride[0]), ("stride_w", stride[1]),
            ("pad_h", pad[0]), ("pad_w", pad[1]))


#: A generic ``reduce_window`` (``lax.reduce_window`` with ``lax.max``/``lax.add`` and an init the
#: monoid check did not take as its identity) computing what the specialised primitive does.
_GENERIC = {("max", -math.inf): "reduce_window_max", ("add", 0.0): "reduce_window_sum"}


def _window_prim(fe: Any) -> str:
    """``reduce_window_max``/``reduce_window_sum`` for a generic ``reduce_window`` of one operand whose
    computation is one ``max``/``add`` of its two arguments and whose init is that op's identity;
    the equation's own primitive otherwise."""
    if fe.prim != "reduce_window" or len(fe.ins) != 2:
        return str(fe.prim)
    body = getattr(fe.eqn.params.get("jaxpr"), "jaxpr", fe.eqn.params.get("jaxpr"))
    eqns: Any = getattr(body, "eqns", ())
    if len(eqns) != 1 or list(eqns[0].invars) != list(body.invars) or list(eqns[0].outvars) != list(body.outvars):
        return str(fe.prim)
    init = _scalar(fe.ins[1])
    return str(fe.prim) if init is None else _GENERIC.get((str(eqns[0].primitive.name), init), str(fe.prim))


def _match(g: Any, i: int) -> tuple[str, tuple[int, ...], tuple[int, ...], tuple[tuple[str, int], ...], int] | None:
    """``(kind, NHWC shape, NHWC out shape, params, last equation)`` of a pool at equation ``i``."""
    fe = g.flat[i]
    shape = _shape(fe.eqn.invars[0]) if fe.eqn.invars else ()
    if len(shape) != 4 or not fe.outs:
        return None
    p = fe.eqn.params
    prim = _window_prim(fe)
    if prim in _WINDOW:
        if any(d != 1 for d in (*p["base_dilation"], *p["window_dilation"])):
            return None
        window, strides, pads = tuple(p["window_dimensions"]), tuple(p["window_strides"]), tuple(p["padding"])
        axes = _spatial(window, strides, pads)
        if axes is None or any(lo != hi for lo, hi in (pads[a] for a in axes)):
            return None
        kind, size = _WINDOW[prim], window[axes[0]] * window[axes[1]]
        out = _nhwc(_shape(fe.outs[0]), axes)
        params = _params((window[axes[0]], window[axes[1]]), (strides[axes[0]], strides[axes[1]]),
                         (pads[axes[0]][0], pads[axes[1]][0]))
    elif fe.prim in _GLOBAL:
        axes = tuple(sorted(p.get("axes", ())))
        if axes not in ((1, 2), (2, 3)):
            return None
        kind, size = _GLOBAL[fe.prim], shape[axes[0]] * shape[axes[1]]
        nhwc = _nhwc(shape, axes)
        out = (nhwc[0], 1, 1, nhwc[3])
        params = _params((shape[axes[0]], shape[axes[1]]), (1, 1), (0, 0))
    else:
        return None
    last = i
    if kind == "avgpool":
        div = _divided(g, i, size)
        if div is None:
            return None
        last = div
    return kind, _nhwc(shape, axes), out, params, last


def find_pools(g: Any, result: Any, taken: set[int], label: Callable[[Any], str]) -> None:
    """Add the pools of graph ``g`` to the plan ``result`` (module docstring)."""
    for i, fe in enumerate(g.flat):
        if i in taken or i in result.consumed or i in result.emit or _window_prim(fe) not in {*_WINDOW, *_GLOBAL}:
            continue
        if not getattr(getattr(fe.eqn.invars[0], "aval", None), "dtype", None) or \
                fe.eqn.invars[0].aval.dtype.kind != "f":
            continue
        found = _match(g, i)
        if found is None:
            continue
        kind, shape, out, params, last = found
        scope = label(fe.eqn)
        result.emit[last] = VectorOp(kind=kind, shape=shape, out_shape=out, params=params,
                                     name=f"{scope}/{kind}" if scope else kind,
                                     origin=where(fe.eqn).replace(fe.prim, f"{kind} ({fe.prim})", 1))
        if last != i:
            result.consumed.add(i)
        result.inputs[last] = (fe.ins[0],)
        result.members.update({i: last, last: last})
