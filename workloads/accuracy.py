"""Accuracy of a workload in a pair of operand formats: SQNR (dB) against float32 JAX.

For each distinct matrix-op geometry of the workload (a conv as its GEMM ``m x k x n``) the data
is deterministic: activations ``a`` standard normal, weights ``b`` normal with standard deviation
``1/sqrt(k)`` (so outputs are of unit size whatever ``k``), drawn from
``numpy.random.default_rng`` seeded with the seed and the geometry; at most :data:`MAX_ROWS`
rows of ``A`` and :data:`MAX_COLS` columns of ``B`` are drawn (rows and columns of ``C`` are
independent), and at most :data:`MAX_DEPTH` of the ``k`` terms each output sums (a fixed budget:
an op costs at most ``(MAX_ROWS + MAX_COLS) * MAX_DEPTH`` drawn elements, 21 MB in float64, whatever
its size; ``gemm:k=100000000`` or ``llama_decode:kv=1000000`` included). Up to that depth the
reduction is kept whole.

Sampling the reduction, and its error: the terms' rounding errors are independent of each
other, so the signal and the noise of a sum both grow in proportion to its length and their
ratio does not depend on it; a ``k``-long product is scored as a ``MAX_DEPTH``-long one (weights
of standard deviation ``1/sqrt(MAX_DEPTH)``). Two effects are left out, both making the true SQNR
lower: the accumulator's own rounding (float32 sums: relative error at most ``k * 2**-24``
against ``MAX_DEPTH * 2**-24``, Higham's bound; integer accumulators are exact), and the
per-tensor scale, which sees only the drawn elements; an integer format's step is set by the
largest element, whose expected size grows as ``sqrt(2 ln N)`` for ``N`` normal elements, so
the full tensor would lose ``20 log10(sqrt(ln N_full / ln N_drawn))`` dB: 0.6 dB for ``k = 1e5``,
1.2 dB for ``k = 1e6``, 2.2 dB for ``k = 1e8``, 2.8 dB for ``k = 2**31`` (``MAX_ROWS`` rows: ``N``
3.2e9 against 5.2e5 at ``k = 1e8``). Rows
and columns were always sampled the same way. Every builtin workload at its default options
has ``k`` below the budget (11,008 at most), so its figure is exact.

A user's float JAX or PyTorch model (``package.module:function[:quant=tensor|channel,calib=FILE.npz,samples=N]``,
a workload of ``source`` ``"jax"`` or ``"torch"`` with at most :data:`workloads._ptq.PTQ_MAX_MACS` MACs) is
measured whole instead: quantised after a calibration pass, its outputs against the float model's
(:mod:`workloads._ptq`, in a child process as its tracing is). A model that pass does not take (an
integer model, a ``scan``...) keeps the estimate above; :func:`sqnr_source` says which was used.
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

__all__ = ["workload_sqnr_db", "sqnr_table", "sqnr_source", "MAX_ROWS", "MAX_COLS", "MAX_DEPTH", "SQNR_CAP_DB"]

#: Rows of ``A`` and columns of ``B`` drawn per op at most.
MAX_ROWS, MAX_COLS = 32, 128
#: Terms of each output's sum drawn at most (the reduction ``k`` is sampled beyond it).
MAX_DEPTH = 16384
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
        depth = min(k, MAX_DEPTH)
        a = rng.standard_normal((min(m, MAX_ROWS), depth)).astype(np.float32).astype(np.float64)
        b = (rng.standard_normal((depth, min(n, MAX_COLS))) / math.sqrt(depth)).astype(np.float32).astype(np.float64)
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
    measured = _float_model(workload, weight_format, act_format)
    if isinstance(measured, tuple):
        return measured[0]
    return _pooled(geometries, weight_format, act_format, seed)


#: Sources of a user's model that the quantiser re-loads by its spec: a JAX function, a PyTorch factory.
_USER_SOURCES = ("jax", "torch")


def _quantisable(workload: Workload) -> bool:
    from workloads._ptq import PTQ_MAX_MACS  # noqa: PLC0415  # imports JAX: only for a user's JAX model

    return workload.source in _USER_SOURCES and workload.total_macs <= PTQ_MAX_MACS


@functools.lru_cache(maxsize=64)
def _ptq(spec: str, weight: str, act: str) -> tuple[float, str] | str:
    from workloads._user_child import ptq_user  # noqa: PLC0415

    return ptq_user(spec, weight, act)


def _float_model(workload: Workload, weight: str, act: str) -> tuple[float, str] | str:
    """The quantised float model's ``(sqnr_db, calibration)``, or why there is none."""
    if workload.source not in _USER_SOURCES:
        return "not a user's JAX or PyTorch model"
    if not _quantisable(workload):
        return f"{workload.total_macs:,} MACs (the quantised model runs at most 2**32)"
    return _ptq(workload.name, weight, act)


def sqnr_source(workload: Workload, weight_format: str, act_format: str) -> str:
    """How :func:`workload_sqnr_db` measures ``workload`` in the formats, for humans: the quantised
    float model (its calibration), or the matrix products' estimate (and why)."""
    measured = _float_model(workload, weight_format, act_format)
    if isinstance(measured, tuple):
        return f"the quantised float model, calibrated on {measured[1]}"
    return f"the matrix products on normal data ({measured})"


def sqnr_table(workload: Workload, pairs: Sequence[tuple[str, str]], *, seed: int = 0) -> dict[tuple[str, str], float]:
    """:func:`workload_sqnr_db` of each format pair."""
    return {p: workload_sqnr_db(workload, *p, seed=seed) for p in pairs}
