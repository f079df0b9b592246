"""Reference data and results of GEMM-shaped ops in a float operand format (what simulate checks).

Operands are standard normal values rounded to the format (``workloads.formats.quantise``), with
the format's edge values put in: the largest magnitude of each sign first and last (so
``c[0, 0]`` holds the product ``max_finite**2`` and saturates on output), the smallest
subnormal of each sign and negative zero next to them. They travel as int8 (fp8) or int16
(bf16) codes (``workloads.format_codes``).

fp8: ``c`` is the exact fixed-point accumulator (``workloads.formats.accumulate``, int64 in
units of ``2**-(2 s)``) and ``q`` the output stage's fp8 codes (``workloads.format_codes.fp8_output``)
under :func:`float_outputs`.

bf16 and fp8_e5m2: ``c`` is the float32 accumulator's bit pattern (int64 of the int32 view),
summed in the design's folds (``k_folds``, ``workloads.formats.accumulate``), and ``q`` the
output stage's codes (``workloads.format_codes.float_output``, with the op's bias as float32
patterns). E5M2's products cannot overflow float32 (``57344**2 < 2**32``), so its edge values go
in as fp8_e4m3's do. A product of the largest bf16 value with
one above 1 overflows float32 (not data), so the activations' largest magnitudes go down column
0 (``a[0, 0] = -max_finite``, ``a[-1, 0] = max_finite``) and the weights' row 0, which meets them,
is scaled by ``2**-120``; the smallest subnormal of each sign and -0 go along ``a``'s row 0 and
down ``b``'s column 0, so ``c[0, 0]`` adds a product of two smallest subnormals (below float32's
range: it rounds to zero), one of two negative ones and ``-0 * -0``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from accel_spec.errors import WorkloadError
from accel_spec.number_formats import FORMATS, NumberFormat
from workloads.format_codes import float_output, fp8_output, from_codes, to_codes
from workloads.formats import accumulate, quantise
from workloads.ops import Gemm, Op, Requant

__all__ = ["float_format", "float_operands", "float_result", "float_outputs"]


def float_format(name: str) -> NumberFormat:
    """The float format ``name`` names (fp8 or bf16)."""
    f = FORMATS.get(name)
    if f is None or f.is_int:
        raise WorkloadError(f"float reference data is built for float formats, not {name!r}")
    return f


def float_outputs(op: Op) -> Op:
    """``op`` with an fp8 output stage: scale ``2**-shift`` with ``shift = round(log2(sqrt(k)))``
    (standard normal operands give accumulators of RMS ``sqrt(k)``; outputs of RMS near 1),
    bias 0, and the op's ReLU (its ``act_min`` at the zero point) as ``act_min = 0``.
    An op without an output stage is returned unchanged."""
    rq = op.requant
    if rq is None:
        return op
    k = op.to_gemm().k
    shift = min(max(round(0.5 * math.log2(max(k, 1))), 0), 31)
    relu = rq.bounds[0] >= rq.zero_point
    fp8 = Requant(multiplier=(1 << 30,), shift=(shift,), bias=(0,), act_min=0 if relu else None, bits=8)
    return dataclasses.replace(op, requant=fp8)


def _operand(rng: np.random.Generator, shape: tuple[int, int], f: NumberFormat, weight: bool = False) -> np.ndarray:
    x = quantise(rng.standard_normal(shape), f)
    if f.max_finite ** 2 > float(np.finfo(np.float32).max):  # bf16: edges placed so no float32 product overflows
        tiny, edges = 2.0 ** -120, [f.min_subnormal, -f.min_subnormal, -0.0]
        if weight:  # row 0 scaled down (it meets the activations' largest values), edges down column 0
            x[0] = quantise(x[0] * tiny, f)
            for i, v in enumerate(edges[:max(x.shape[0] - 1, 0)]):
                x[i + 1, 0] = v
        else:  # the largest magnitudes down column 0, the small edges along row 0
            x[0, 0], x[-1, 0] = -f.max_finite, f.max_finite
            for i, v in enumerate(edges[:max(x.shape[1] - 1, 0)]):
                x[0, i + 1] = v
        return x
    flat = x.reshape(-1)
    edges = [-f.max_finite, f.min_subnormal, -f.min_subnormal, -0.0]
    for i, v in enumerate(edges[:max(flat.size - 1, 0)]):
        flat[i] = v
    flat[-1] = f.max_finite
    return x


def float_result(op: Op, start: int, a: np.ndarray, b: np.ndarray, fmt: str,
                 k_folds: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``(c, q)`` of operand codes ``a @ b``: the accumulators (int64: fp8 exact fixed point, bf16
    the float32 pattern summed in ``k_folds``) and, for a requantised op, the output codes (int8 /
    int16) with its channels from ``start``."""
    f = float_format(fmt)
    if f.accumulator == "fp32":
        acc = accumulate(from_codes(a, f), from_codes(b, f), f, folds=k_folds)
        c = acc.view(np.int32).astype(np.int64)
        rq = op.requant
        if rq is None:
            return c, None
        n = c.shape[-1]
        return c, float_output(acc, f, shift=np.asarray(rq.channel_values("shift", n, start)),
                               bias=np.asarray(rq.channel_values("bias", n, start)), relu=rq.bounds[0] >= 0)
    c = accumulate(from_codes(a, f), from_codes(b, f), f).astype(np.int64)
    rq = op.requant
    if rq is None:
        return c, None
    n = c.shape[-1]
    q = fp8_output(c, f, shift=np.asarray(rq.channel_values("shift", n, start)),
                   bias=np.asarray(rq.channel_values("bias", n, start)), relu=rq.bounds[0] >= 0)
    return c, q


def float_operands(op: Op, seed: int, index: int, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """The operand codes ``(a, b)`` (int8 / int16) of GEMM instance ``index`` of ``op`` in ``fmt``."""
    f = float_format(fmt)
    if not isinstance(op, Gemm):
        raise WorkloadError(f"{f.name} reference data is built for GEMM ops, not {type(op).__name__}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3, op.m, op.k, op.n, op.batch, index, f.bits]))
    return to_codes(_operand(rng, (op.m, op.k), f), f), to_codes(_operand(rng, (op.k, op.n), f, weight=True), f)
