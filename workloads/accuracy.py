"""Accuracy of a workload in a pair of operand formats: SQNR (dB) against float32 JAX.

For each distinct matrix-op geometry of the workload (a conv as its GEMM ``m x k x n``) the data
is deterministic: activations ``a`` standard normal, weights ``b`` normal with standard deviation
``1/sqrt(k)`` (so outputs are of unit size whatever ``k``), drawn from
``numpy.random.default_rng`` seeded with the seed and the geometry; at most :data:`MAX_ROWS`
rows of ``A`` and :data:`MAX_COLS` columns of ``B`` are drawn (rows and columns of ``C`` are
independent; ``k``, which decides the accumulation, is kept whole). The reference is the
float32 ``a @ b`` (numpy's; JAX's float32 matmul agrees to float32 rounding, checked in the
tests); the test is :func:`workloads.formats.dequantised_product` (per-tensor scales, the
formats' products, sums and roundings). The workload's SQNR pools the squared signal and
error of every op's sampled output, each op weighted by how many times it runs.

Ops are scored independently (the data does not flow through the network: the metric is the
formats' matrix-product error on the workload's shapes, not an end-to-end model accuracy).
Results are cached per (geometry list, formats, seed) in the process: a sweep computes each
(workload, format pair) once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from accel_spec.errors import WorkloadError
from accel_spec.number_formats import FORMATS
from workloads.formats import dequantised_product
from workloads.ops import Conv2d, Gemm, Workload

__all__ = ["workload_sqnr_db", "sqnr_table", "MAX_ROWS", "MAX_COLS", "SQNR_CAP_DB"]

#: Rows of ``A`` and columns of ``B`` drawn per op at most.
MAX_ROWS, MAX_COLS = 32, 128
#: An error-free result is reported as this many dB (a finite number a study can store).
SQNR_CAP_DB = 300.0


def _geometries(workload: Workload) -> tuple[tuple[int, int, int, int], ...]:
    """``(m, k, n, runs)`` of each distinct GEMM shape of the workload's matrix ops."""
    runs: dict[tuple[int, int, int], int] = {}
    for op, count in zip(workload.ops, workload.counts, strict=True):
        if isinstance(op, (Gemm, Conv2d)):
            g = op.to_gemm()
            key = (g.m, g.k, g.n)
            runs[key] = runs.get(key, 0) + count * g.batch
    return tuple((m, k, n, c) for (m, k, n), c in sorted(runs.items()))


def _float32_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The float32 product (numpy's float32 matmul: no JAX in a sweep's workers; it and JAX's float32
    matmul differ by float32 rounding only, far below any format's error: ``tests/workloads/test_accuracy.py``)."""
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)


@functools.lru_cache(maxsize=256)
def _pooled(geometries: tuple[tuple[int, int, int, int], ...], weight: str, act: str, seed: int) -> float:
    signal = noise = 0.0
    for m, k, n, runs in geometries:
        rng = np.random.default_rng(np.random.SeedSequence([seed, 30, m, k, n]))
        a = rng.standard_normal((min(m, MAX_ROWS), k)).astype(np.float32).astype(np.float64)
        b = (rng.standard_normal((k, min(n, MAX_COLS))) / math.sqrt(k)).astype(np.float32).astype(np.float64)
        ref = _float32_reference(a, b)
        out = dequantised_product(a, b, weight, act)
        signal += runs * float(np.sum(ref * ref))
        noise += runs * float(np.sum((ref - out) ** 2))
    if noise == 0.0:
        return SQNR_CAP_DB
    return min(10.0 * math.log10(signal / noise), SQNR_CAP_DB)


def workload_sqnr_db(workload: Workload, weight_format: str, act_format: str, *, seed: int = 0) -> float:
    """SQNR (dB) of ``workload``'s matrix products in the given formats (module docstring).

    Args:
        workload: the workload (its matrix ops and counts).
        weight_format, act_format: names of :data:`accel_spec.number_formats.FORMATS`.
        seed: seed of the float data.

    Returns:
        The pooled SQNR in dB, at most :data:`SQNR_CAP_DB`; ``nan`` for a workload without
        matrix ops.
    """
    geometries = _geometries(workload)
    if not geometries:
        return math.nan
    for name in (weight_format, act_format):
        if name not in FORMATS:
            raise WorkloadError(f"format must be one of {', '.join(FORMATS)}, not {name!r}")
    return _pooled(geometries, weight_format, act_format, seed)


def sqnr_table(workload: Workload, pairs: Sequence[tuple[str, str]], *, seed: int = 0) -> dict[tuple[str, str], float]:
    """:func:`workload_sqnr_db` of each format pair."""
    return {p: workload_sqnr_db(workload, *p, seed=seed) for p in pairs}
