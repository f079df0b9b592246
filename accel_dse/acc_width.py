"""The accumulator width a workload needs, against the design's ``acc_bits``.

The model marks an op ``overflow`` when its K products can exceed the accumulator
(``perf_model.evaluator.failures.overflows``: ``K * largest product > 2**(acc_bits - 1) - 1``,
the largest product of integer lanes or of a float format pair from
``perf_model.evaluator.failures.max_products``). :func:`acc_needs` asks that same rule for the
smallest width that holds each op, and groups the ops by it; :func:`acc_error` is the one line
``evaluate`` and ``design check --workload`` refuse such a design with (exit 2): every width the
workload's ops need, the widest first, each with its ops and K. :func:`narrow_for` applies the
same rule to op records before any model run (``simulate`` refuses with the same line before it builds).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["acc_needs", "acc_error", "narrow_for", "MAX_NAMES"]

#: Op names listed per width at most (the rest counted).
MAX_NAMES = 8
#: Widths searched for the smallest that holds an op.
_WIDEST = 256


def _needed_bits(k: int, config: Any) -> int:
    """The smallest ``acc_bits`` the model's overflow rule accepts for ``k`` products on ``config``."""
    import numpy as np

    from perf_model.arrays.designs import DesignArrays
    from perf_model.evaluator.failures import max_products, overflows

    product = max_products(DesignArrays.from_configs([config]))
    widths = np.arange(2, _WIDEST + 1)
    fits = ~overflows(np.full(widths.shape, k), np.full(widths.shape, config.input_bits), widths,
                      np.full(widths.shape, float(product[0])))
    return int(widths[np.argmax(fits)]) if fits.any() else _WIDEST + 1


def acc_needs(config: Any, ops: Sequence[Any], *, every: bool = False) -> list[dict[str, Any]]:
    """The accumulator widths the model's ``overflow`` ops need (``every``: all ops), widest first.

    Args:
        config: the design (``ArrayConfig``).
        ops: the model's per-op results (``OpResult``: ``name``, ``status``, ``gemm``); only
            those with status ``overflow`` are counted unless ``every``.
        every: count every op (what the workload needs, whether the design holds it or not).

    Returns:
        One entry per width: ``bits``, ``ops`` (names, program order), ``k`` (the largest K among them).
    """
    by_bits: dict[int, dict[str, Any]] = {}
    cache: dict[int, int] = {}
    for op in ops:
        if op.status != "overflow" and not every:
            continue
        k = int(op.gemm[1])
        if k not in cache:
            cache[k] = _needed_bits(k, config)
        entry = by_bits.setdefault(cache[k], {"bits": cache[k], "ops": [], "k": k})
        entry["ops"].append(op.name)
        entry["k"] = max(entry["k"], k)
    return [by_bits[b] for b in sorted(by_bits, reverse=True)]


def acc_error(config: Any, workload: str, needs: Sequence[dict[str, Any]]) -> str:
    """One line: the design's ``acc_bits``, the width ``workload`` needs and which op, and every
    width its ops need (``needs`` of :func:`acc_needs`, not empty)."""
    widest = needs[0]
    parts = []
    for need in needs:
        names = need["ops"][:MAX_NAMES]
        more = len(need["ops"]) - len(names)
        listed = ", ".join(names) + (f" and {more} more" if more else "")
        parts.append(f"{need['bits']} for {listed} (K {need['k']:,})")
    return (f"acc_bits = {config.acc_bits} is too narrow for {workload}: its sums need acc_bits >= {widest['bits']} "
            f"(op {widest['ops'][0]!r}, K = {widest['k']:,}, {config.weight_fmt.name} operands); by op: "
            + "; ".join(parts))


def narrow_for(config: Any, named_ops: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The widths past ``config.acc_bits`` that op records need (the model's overflow rule on each
    op's whole K, as :func:`acc_needs`), widest first; ``[]`` when the accumulator holds them all.

    Args:
        config: the design (``ArrayConfig``).
        named_ops: ``(name, op record)`` pairs (``workloads`` ``Gemm``/``Conv2d``: ``to_gemm().k``).
    """
    from types import SimpleNamespace

    records = []
    for name, op in named_ops:
        g = op.to_gemm()
        records.append(SimpleNamespace(name=name, status="overflow", gemm=(int(g.m), int(g.k), int(g.n))))
    return [need for need in acc_needs(config, records, every=True) if need["bits"] > config.acc_bits]
