"""The shape of a builtin model: a pure JAX function plus its deterministic arguments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax

__all__ = ["Model"]


@dataclass(frozen=True)
class Model:
    """A builtin workload in one numeric form.

    Attributes:
        fn: The pure JAX function, called as ``fn(*args)`` (``args[0]`` is the parameter pytree).
        make_args: ``make_args(seed)`` -> the argument tuple (parameters and inputs), drawn
            deterministically from ``jax.random.key(seed)``.
    """

    fn: Callable[..., Any]
    make_args: Callable[[int], tuple[Any, ...]]

    def example_args(self) -> tuple[Any, ...]:
        """The arguments as ``jax.ShapeDtypeStruct`` pytrees (nothing is computed)."""
        return jax.eval_shape(lambda: self.make_args(0))
