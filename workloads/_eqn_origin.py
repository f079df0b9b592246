"""Where the user's code issued a jaxpr equation, for op records and messages (the tracer's and
the float patterns' one way of saying it)."""

from __future__ import annotations

from typing import Any

from jax._src import source_info_util

__all__ = ["eqn_origin"]


def eqn_origin(eqn: Any) -> str:
    """``"primitive at file:line (function)"``: where the user's code issued the equation."""
    prim = eqn.primitive.name
    try:
        where = source_info_util.summarize(eqn.source_info)
    except Exception:  # private helper; a missing frame is no reason to fail
        where = ""
    return f"{prim} at {where}" if where else prim
