"""Reference data for the bit-exact RTL check: deterministic integer operands and JAX's exact result.

:func:`reference` gives, for one GEMM instance of an op's lowering (``index < op.to_gemm().batch``),
the operands ``a`` (``m x k``) and ``b`` (``k x n``) and the exact product ``c`` (``m x n``)
computed by JAX with ``preferred_element_type`` (int32, or int64 when ``k * 2**(2*bits - 2)``
could overflow int32). Operands are uniform signed ``bits``-bit integers (int8 for
``bits <= 8``, else int16) from ``numpy.random.default_rng`` seeded with the seed and the op's
geometry (not its name), and always contain the most negative and the most positive value
(``-128`` and ``127`` for 8 bits) when the matrix has two or more entries.

For a :class:`~workloads.ops.Conv2d` the data is a real convolution: a full NHWC input and HWIO
weight tensor (shared by all groups of a seed), of which group ``index`` takes its channel
slice; JAX computes ``lax.conv_general_dilated`` on that slice, ``a`` is the im2col of the
input slice (rows ``(image, out_y, out_x)``, columns ``(kernel_y, kernel_x, channel)``) and
``b`` the weight slice reshaped to ``(kh * kw * c_in/groups, c_out/groups)``, so
``a @ b`` equals the convolution's output reshaped to ``(n * out_h * out_w, c_out/groups)``.

``weight_bits`` / ``act_bits`` (default ``bits``) narrow the range of ``b`` / ``a`` (an int4 weight
operand in int8 lanes: ``bits = 8, weight_bits = 4``), extremes included; data for
``weight_bits == act_bits == bits`` is what it was before they existed. :func:`narrow_outputs`
clamps a requantised op's outputs to the activation range, so a chain stays in it.

For a requantised op (``op.requant``), ``q`` is ``c`` through the JAX output stage
(:func:`workloads._requant.output_stage`, the instance's channels). :func:`chained_references`
runs a chain of requantised GEMM-shaped ops as a network: each op's input is the previous op's
``q``.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from accel_spec.errors import WorkloadError
from workloads._float_reference import float_format, float_operands, float_result
from workloads._requant import output_stage
from workloads.ops import Conv2d, Gemm, Op, chain_link

__all__ = ["Reference", "reference", "im2col", "chained_references", "chain_link", "conv_nhwc_reference",
           "narrow_outputs"]

_MAX_BITS = 16


@dataclass(frozen=True, eq=False)
class Reference:
    """Operands and exact result of one GEMM instance of an op.

    Attributes:
        op: The op the data is for.
        index: Which GEMM instance (group of a conv, batch entry of a batched GEMM).
        seed: The seed the operands were drawn with.
        bits: Operand width in bits.
        a: ``m x k`` input operand (int8, or int16 for ``bits > 8``).
        b: ``k x n`` weight operand (same dtype as ``a``).
        c: ``m x n`` exact ``a @ b`` (int32, or int64 when int32 could overflow).
        x: For a conv, the group's NHWC input slice ``(n, h, w, c_in/groups)``; else ``None``.
        w: For a conv, the group's HWIO weight slice ``(kh, kw, c_in/groups, c_out/groups)``; else ``None``.
        q: For a requantised op, ``c`` through the output stage (int8, or int16 for ``bits > 8``
            requant); else ``None``.
    """

    op: Op
    index: int
    seed: int
    bits: int
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    x: np.ndarray | None = None
    w: np.ndarray | None = None
    q: np.ndarray | None = None


def channel_start(op: Op, index: int) -> int:
    """First requant channel of GEMM instance ``index`` of ``op`` (0 when channels are shared)."""
    gemm = op.to_gemm()
    rq = op.requant
    return index * gemm.n if rq is not None and rq.channels == gemm.batch * gemm.n else 0


def _requantised(ref: Reference) -> Reference:
    if ref.op.requant is None:
        return ref
    q = np.asarray(output_stage(ref.c, ref.op.requant, start=channel_start(ref.op, ref.index)))
    return dataclasses.replace(ref, q=q)


def _check_int(name: str, value: object, low: int, high: int | None, rule: str) -> int:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        v = int(value)
        if v >= low and (high is None or v <= high):
            return v
    raise WorkloadError(f"{name} must be {rule}, not {value!r}")


def _dtypes(bits: int, k: int) -> tuple[np.dtype, np.dtype]:
    """Operand dtype for ``bits`` and result dtype for contraction length ``k``."""
    operand = np.dtype(np.int8 if bits <= 8 else np.int16)
    worst = k * (1 << (2 * bits - 2))  # |(-2^(b-1))^2 * k|
    return operand, np.dtype(np.int32 if worst <= np.iinfo(np.int32).max else np.int64)


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, *key]))


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], bits: int, dtype: np.dtype) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=dtype)


def _with_extremes(x: np.ndarray, bits: int) -> np.ndarray:
    """Put the largest value last and the smallest first (the smallest wins on one element)."""
    flat = x.reshape(-1)
    flat[-1] = (1 << (bits - 1)) - 1
    flat[0] = -(1 << (bits - 1))
    return x


def _jax_exact(fn: Callable[..., Any], out_dtype: np.dtype, *args: np.ndarray) -> np.ndarray:
    if out_dtype == np.int64:
        with jax.enable_x64(True):
            return np.asarray(fn(*args, jnp.int64))
    return np.asarray(fn(*args, jnp.int32))


def _gemm_reference(op: Gemm, seed: int, index: int, bits: int, wbits: int, abits: int) -> Reference:
    operand, result = _dtypes(bits, op.k)
    narrowed = () if wbits == abits == bits else (wbits, abits)
    rng = _rng(seed, 1, op.m, op.k, op.n, op.batch, index, bits, *narrowed)
    a = _with_extremes(_uniform(rng, (op.m, op.k), abits, operand), abits)
    b = _with_extremes(_uniform(rng, (op.k, op.n), wbits, operand), wbits)
    c = _jax_exact(lambda x, y, t: jnp.matmul(x, y, preferred_element_type=t), result, a, b)
    return Reference(op=op, index=index, seed=seed, bits=bits, a=a, b=b, c=c)


def _window_indices(out: int, kernel: int, stride: int, dilation: int) -> np.ndarray:
    """``(out, kernel)`` padded-input coordinates read by each output position and kernel tap."""
    return np.arange(out)[:, None] * stride + np.arange(kernel)[None, :] * dilation


def im2col(x: np.ndarray, op: Conv2d) -> np.ndarray:
    """Im2col of an NHWC tensor ``x`` (one group's channels) for ``op``'s window.

    Returns:
        ``(n * out_h * out_w, kh * kw * channels)`` with columns ordered (kernel y, kernel x, channel).
    """
    n, _, _, ch = x.shape
    xp = np.pad(x, ((0, 0), (op.pad_h, int(op.pad_h_hi or 0)), (op.pad_w, int(op.pad_w_hi or 0)), (0, 0)))
    rows = _window_indices(op.out_h, op.kh, op.stride_h, op.dilation_h)
    cols = _window_indices(op.out_w, op.kw, op.stride_w, op.dilation_w)
    patches = xp[:, rows[:, None, :, None], cols[None, :, None, :], :]  # (n, oh, ow, kh, kw, ch)
    return patches.reshape(n * op.out_h * op.out_w, op.kh * op.kw * ch)


def _read_span(size: int, out: int, kernel: int, stride: int, dilation: int, pad: int) -> tuple[int, int]:
    """First and last unpadded input coordinate any window reads (``(-1, -1)`` if none)."""
    coords = _window_indices(out, kernel, stride, dilation).reshape(-1) - pad
    coords = coords[(coords >= 0) & (coords < size)]
    return (int(coords.min()), int(coords.max())) if coords.size else (-1, -1)


def _conv_tensors(op: Conv2d, seed: int, bits: int, wbits: int | None = None, abits: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The whole NHWC input and HWIO weight tensor of ``op`` for ``seed`` (every group's); the
    activations in ``abits``' range and the weights in ``wbits``' (default ``bits``)."""
    wbits = bits if wbits is None else wbits
    abits = bits if abits is None else abits
    g = op.groups
    cin_g, cout_g = op.c_in // g, op.c_out // g
    operand, _ = _dtypes(bits, cin_g * op.kh * op.kw)
    narrowed = () if wbits == abits == bits else (wbits, abits)
    rng = _rng(seed, 2, op.n, op.h, op.w, op.c_in, op.c_out, op.kh, op.kw, g, bits, *narrowed)
    x = _uniform(rng, (op.n, op.h, op.w, op.c_in), abits, operand)
    w = _uniform(rng, (op.kh, op.kw, cin_g, op.c_out), wbits, operand)
    lo, hi = -(1 << (abits - 1)), (1 << (abits - 1)) - 1
    y0, y1 = _read_span(op.h, op.out_h, op.kh, op.stride_h, op.dilation_h, op.pad_h)
    x0, x1 = _read_span(op.w, op.out_w, op.kw, op.stride_w, op.dilation_w, op.pad_w)
    if y0 >= 0 and x0 >= 0:  # put both extremes where every group's windows read them
        x[-1, y1, x1, np.arange(g) * cin_g + cin_g - 1] = hi
        x[0, y0, x0, np.arange(g) * cin_g] = lo
    w[-1, -1, -1, np.arange(g) * cout_g + cout_g - 1] = (1 << (wbits - 1)) - 1
    w[0, 0, 0, np.arange(g) * cout_g] = -(1 << (wbits - 1))
    return x, w


def _conv(op: Conv2d, lhs: Any, rhs: Any, out_type: Any, groups: int = 1) -> jax.Array:
    return lax.conv_general_dilated(
        lhs, rhs, (op.stride_h, op.stride_w), ((op.pad_h, int(op.pad_h_hi or 0)), (op.pad_w, int(op.pad_w_hi or 0))),
        rhs_dilation=(op.dilation_h, op.dilation_w), dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=groups, preferred_element_type=out_type)


def conv_nhwc_reference(op: Conv2d, seed: int = 0, *, bits: int = 8, weight_bits: int | None = None,
                        act_bits: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole conv of :func:`reference`'s data (every group at once): ``(x, w, out)`` with
    NHWC ``x`` (``n x h x w x c_in``), HWIO ``w`` (``kh x kw x c_in/groups x c_out``) and the NHWC
    output, exact, through the output stage when ``op.requant`` (as the accelerator runs a conv
    from NHWC activations, ``perf_model.compiler.conv``)."""
    if not isinstance(op, Conv2d):
        raise WorkloadError(f"conv_nhwc_reference needs a Conv2d record, not {op!r}")
    wbits, abits = _narrow_bits(bits, weight_bits, act_bits)
    x, w = _conv_tensors(op, seed, bits, wbits, abits)
    _, result = _dtypes(bits, op.c_in // op.groups * op.kh * op.kw)
    out = _jax_exact(lambda lhs, rhs, t: _conv(op, lhs, rhs, t, op.groups), result, x, w)
    if op.requant is not None:
        out = np.asarray(output_stage(out, op.requant))
    return x, w, np.asarray(out)


def _conv_reference(op: Conv2d, seed: int, index: int, bits: int, wbits: int, abits: int) -> Reference:
    g = op.groups
    cin_g, cout_g = op.c_in // g, op.c_out // g
    k = cin_g * op.kh * op.kw
    _, result = _dtypes(bits, k)
    x, w = _conv_tensors(op, seed, bits, wbits, abits)
    xs = np.ascontiguousarray(x[..., index * cin_g:(index + 1) * cin_g])
    ws = np.ascontiguousarray(w[..., index * cout_g:(index + 1) * cout_g])
    out = _jax_exact(lambda lhs, rhs, t: _conv(op, lhs, rhs, t), result, xs, ws)
    a = im2col(xs, op)
    b = ws.reshape(k, cout_g)
    c = out.reshape(op.n * op.out_h * op.out_w, cout_g)
    return Reference(op=op, index=index, seed=seed, bits=bits, a=a, b=b, c=c, x=xs, w=ws)


def reference(op: Op, seed: int = 0, *, index: int = 0, bits: int = 8, weight_bits: int | None = None,
              act_bits: int | None = None, number_format: str | None = None,
              k_folds: tuple[int, ...] | None = None) -> Reference:
    """Deterministic operands and the exact JAX result for GEMM instance ``index`` of ``op``.

    Args:
        op: A :class:`~workloads.ops.Gemm` or :class:`~workloads.ops.Conv2d`.
        seed: Non-negative seed; the same seed, op geometry and ``bits`` give the same data.
        index: GEMM instance, ``0 <= index < op.to_gemm().batch`` (the group of a grouped conv).
        bits: Signed operand width (the lanes), 2 to 16 bits.
        weight_bits, act_bits: Range of ``b`` / ``a`` values, 2 to ``bits`` (default ``bits``).
        number_format: a float format for both operands (``workloads._float_reference``: fp8
            int8 codes, fixed-point accumulators, fp8 output codes; bf16 int16 codes, float32
            accumulators, bf16 output codes), or ``None`` for integers.
        k_folds: bf16: the first ``k`` of each fold the design sums on its own (the order of
            its float32 additions, ``workloads.formats.accumulate``); ``None``: one fold.

    Returns:
        A :class:`Reference` whose ``c`` equals ``a.astype(int64) @ b.astype(int64)`` exactly.

    Raises:
        WorkloadError: for an op that is not a ``Gemm``/``Conv2d``, or a bad seed, index or bits.
    """
    if not isinstance(op, (Gemm, Conv2d)):
        raise WorkloadError(f"reference op must be a Gemm or Conv2d record, not {op!r}")
    seed = _check_int("seed", seed, 0, None, "a non-negative integer")
    bits = _check_int("bits", bits, 2, _MAX_BITS, f"an integer in [2, {_MAX_BITS}]")
    batch = op.to_gemm().batch
    index = _check_int("index", index, 0, batch - 1, f"an integer in [0, {batch - 1}] (the op's batch)")
    wbits, abits = _narrow_bits(bits, weight_bits, act_bits)
    if number_format is not None:
        a, b = float_operands(op, seed, index, number_format)
        c, q = float_result(op, channel_start(op, index), a, b, number_format, k_folds)
        return Reference(op=op, index=index, seed=seed, bits=float_format(number_format).bits, a=a, b=b, c=c, q=q)
    if isinstance(op, Gemm):
        return _requantised(_gemm_reference(op, seed, index, bits, wbits, abits))
    return _requantised(_conv_reference(op, seed, index, bits, wbits, abits))


def _narrow_bits(bits: int, weight_bits: object, act_bits: object) -> tuple[int, int]:
    rule = f"an integer in [2, {bits}] (bits)"
    wbits = bits if weight_bits is None else _check_int("weight_bits", weight_bits, 2, bits, rule)
    abits = bits if act_bits is None else _check_int("act_bits", act_bits, 2, bits, rule)
    return wbits, abits


def narrow_outputs(op: Op, act_bits: int, weight_bits: int | None = None) -> Op:
    """``op``'s output stage for operands narrower than its requant ``bits`` (unchanged otherwise).

    The builtins' requant scales are set for operands of ``bits``: with ``weight_bits``-bit
    weights the accumulators shrink by ``2**(bits - weight_bits)`` on top of the activations'
    own narrowing, so the scale grows by that factor (``shift`` lowered, never below 0) and
    the outputs stay spread over the activation range; ``act_min``/``act_max`` and
    ``zero_point`` are clamped into ``[-2**(act_bits-1), 2**(act_bits-1) - 1]`` (the output
    stage's own saturation, with the narrower bounds), so a chain stays in that range.
    """
    rq = op.requant
    wbits = act_bits if weight_bits is None else weight_bits
    if rq is None or (act_bits >= rq.bits and wbits >= rq.bits):
        return op
    lo, hi = -(1 << (act_bits - 1)), (1 << (act_bits - 1)) - 1
    act_min, act_max = rq.bounds

    def clamp(v: int) -> int:
        return min(max(int(v), lo), hi)

    gain = max(rq.bits - wbits, 0)
    narrowed = dataclasses.replace(rq, act_min=clamp(act_min), act_max=clamp(act_max),
                                   zero_point=clamp(rq.zero_point),
                                   shift=tuple(max(int(s) - gain, 0) for s in rq.shift))
    return dataclasses.replace(op, requant=narrowed)


def chained_references(ops: Sequence[Op], seed: int = 0, *, bits: int = 8, weight_bits: int | None = None,
                       act_bits: int | None = None, number_format: str | None = None,
                       k_folds: Sequence[tuple[int, ...] | None] | None = None) -> list[Reference]:
    """JAX references of ``ops`` run as a network: op ``i + 1``'s input is op ``i``'s ``q``.

    Op 0's input is its own :func:`reference` input; op ``i``'s weights are those of
    ``reference(ops[i], seed + i)`` (so equal-shaped layers get different weights).

    Raises:
        WorkloadError: fewer than two ops, or a pair that is not a :func:`chain_link`.
    """
    if len(ops) < 2:
        raise WorkloadError(f"a chain needs at least two ops, not {len(ops)}")
    for i in range(len(ops) - 1):
        if not chain_link(ops[i], ops[i + 1]):
            raise WorkloadError(f"ops {i} and {i + 1} do not chain (requantised, batch 1, next m = m, next k = n)")
    out: list[Reference] = []
    if number_format is not None:  # fp8 / bf16: op i + 1 reads op i's output codes
        a = float_operands(ops[0], seed, 0, number_format)[0]
        folds = list(k_folds) if k_folds is not None else [None] * len(ops)
        for i, op in enumerate(ops):
            b = float_operands(op, seed + i, 0, number_format)[1]
            c, q = float_result(op, 0, a, b, number_format, folds[i])
            out.append(Reference(op=op, index=0, seed=seed + i, bits=float_format(number_format).bits, a=a, b=b,
                                 c=c, q=q))
            a = q  # type: ignore[assignment]
        return out
    a = reference(ops[0], seed, bits=bits, weight_bits=weight_bits, act_bits=act_bits).a
    for i, op in enumerate(ops):
        b = reference(op, seed + i, bits=bits, weight_bits=weight_bits, act_bits=act_bits).b
        operand, result = _dtypes(bits, op.to_gemm().k)
        a = a.astype(operand)
        c = _jax_exact(lambda x, y, t: jnp.matmul(x, y, preferred_element_type=t), result, a, b)
        ref = _requantised(Reference(op=op, index=0, seed=seed + i, bits=bits, a=a, b=b, c=c))
        out.append(ref)
        a = ref.q  # type: ignore[assignment]
    return out
