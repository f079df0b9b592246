"""A jaxpr flattened for the float pattern matcher (``workloads._float_patterns``).

:func:`flatten` inlines the single-jaxpr calls (``jit``, ``custom_jvp_call``...) so a model's code
and the calls it makes are one list of :class:`FlatEqn`; each operand is known by an identity
(:class:`_Lit` for a literal or inner constant, :class:`_Out` for a result inlined from a call).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax.extend.core as jex_core

__all__ = ["FlatEqn", "flatten"]


@dataclass
class FlatEqn:
    """One equation of a flattened jaxpr: the original equation and its operands' identities."""

    eqn: Any
    ins: tuple[Any, ...]
    outs: tuple[Any, ...]

    @property
    def prim(self) -> str:
        """The primitive's name."""
        return str(self.eqn.primitive.name)


class _Lit:
    """Identity of one literal or inner constant (never equal to another)."""

    def __init__(self, value: Any = None) -> None:
        self.value = value


class _Out:
    """Identity of one result of an equation inlined from a called jaxpr. JAX caches a jitted
    function's jaxpr, so two calls of ``jax.nn.silu`` inline the same ``Var`` objects: each inlined
    result gets its own identity, else the two call sites would merge into one (cyclic) graph."""

    __slots__ = ("var",)

    def __init__(self, var: Any) -> None:
        self.var = var

    @property
    def aval(self) -> Any:
        """The abstract value of the variable it stands for."""
        return self.var.aval


def flatten(jaxpr: Any, opaque: Callable[[Any], bool], consts: Any = ()) -> list[FlatEqn]:
    """The equations of ``jaxpr`` with single-jaxpr calls inlined (recursively).

    Args:
        jaxpr: A ``Jaxpr``.
        opaque: Whether an equation must stay as it is (not inlined): the tracer's vector-op
            markers, the output stage, ``scan``/``cond``/``while``.
        consts: The values of ``jaxpr``'s constvars (a closed jaxpr's consts), where known: a
            constant mask's values are read from them.
    """
    out: list[FlatEqn] = []
    env: dict[Any, Any] = {v: _Lit(c) for v, c in zip(getattr(jaxpr, "constvars", ()), consts, strict=False)}
    _inline(jaxpr, env, opaque, out)
    return out


def _inline(jaxpr: Any, env: dict[Any, Any], opaque: Callable[[Any], bool], out: list[FlatEqn],
            inner: bool = False) -> None:
    def key(v: Any) -> Any:
        if isinstance(v, jex_core.Literal):
            return _Lit(getattr(v, "val", None))
        return env.get(v, v)

    for var in getattr(jaxpr, "constvars", ()):
        env.setdefault(var, _Lit())
    for eqn in jaxpr.eqns:
        ins = tuple(key(v) for v in eqn.invars)
        subs = [] if opaque(eqn) else list(jex_core.jaxprs_in_params(eqn.params))
        if len(subs) == 1 and _is_call(eqn, subs[0]):
            sub = subs[0]
            names = {v: k for v, k in zip(sub.invars, ins, strict=True)}
            _inline(sub, names, opaque, out, inner=True)
            for outer, res in zip(eqn.outvars, sub.outvars, strict=True):
                env[outer] = names.get(res, res) if not isinstance(res, jex_core.Literal) else _Lit(res.val)
        else:
            outs = tuple(eqn.outvars)
            if inner:  # a called jaxpr's own variables: fresh identities for this call site
                outs = tuple(_Out(v) for v in outs)
                env.update(zip(eqn.outvars, outs, strict=True))
            out.append(FlatEqn(eqn, ins, outs))


def _is_call(eqn: Any, sub: Any) -> bool:
    """Whether ``sub`` is what ``eqn`` calls on its operands as they are (a ``jit``, a
    ``custom_jvp_call``...), not a computation it applies element by element (a generic
    ``reduce_window``'s ``max`` of two scalars, a ``scatter``'s combiner)."""
    def shapes(vs: Any) -> list[Any]:
        return [getattr(getattr(v, "aval", None), "shape", None) for v in vs]

    return shapes(sub.invars) == shapes(eqn.invars) and shapes(sub.outvars) == shapes(eqn.outvars)
