"""The integer steps the transformer-block simulate tests write their references with, independent of the
compiler: a matrix op's seeded weights, the output stage, and a vector op's JAX integer definition."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import workloads


def integer_steps(wl, seed: int = 0) -> tuple[Callable[..., np.ndarray], ...]:
    """``(w, out, run)`` for workload ``wl``: ``w(i)`` matrix op ``i``'s seeded ``B`` (seed ``seed + i``,
    as ``simulate`` draws it) as ``k x n`` int64; ``out(acc, i)`` op ``i``'s output stage on
    accumulators ``acc``; ``run(op, *args)`` vector op ``op`` on int8 operands (``workloads._int_ops``)."""
    import jax.numpy as jnp

    from workloads import _int_ops

    ops = wl.ops

    def w(i):
        return np.asarray(workloads.reference(ops[i], seed + i).b).astype(np.int64).reshape(ops[i].k, -1)

    def out(acc, i):
        return np.asarray(workloads.output_stage(acc, ops[i].requant)).astype(np.int64)

    def run(op, *args):
        return np.asarray(_int_ops._run(op.kind, dict(op.params), *(jnp.asarray(a, jnp.int8) for a in args)))

    return w, out, run
