"""Integer-only reference semantics of the vector ops: the work between matrix ops, in JAX.

Every op takes int8 codes and gives int8 codes with :data:`FRAC` fractional bits (value =
code / 16, the builtins' activation scale), computes on int32 only (every bound below is
stated and kept), and uses no float inside: the few real constants (a scale, ln 2, a
polynomial's coefficients, a cos/sin or SiLU table) are rounded to integers once, when the op
is built, as :func:`workloads._requant.derived_requant` does for the output stage. Shapes are
static. ``rshr(v, s) = floor((v + 2**(s-1)) / 2**s)`` (round half up, an arithmetic shift),
``rdiv(a, b) = floor((a + floor(b / 2)) / b)`` (round half up, b > 0), ``sat8`` clamps to
[-128, 127]. The algorithms (``docs/workloads.md``, "Integer vector ops", has them with their
measured errors, from ``bench/int_ops_accuracy.py``):

* ``add``: ``sat8(rshr(a * mult_a + b * mult_b, 14))``, ``mult = round(2**14 * scale_in / scale_out)``.
* ``mul``: ``sat8(rshr(a * b, 4))``. ``relu``, ``relu6`` (clamp at 96, the code of 6.0): exact.
* ``maxpool``: the window's max, padding never wins (-128). ``avgpool``: ``sat8(rdiv(sum, wh * ww))``
  (padding counts as zeros in the divisor, PyTorch's ``count_include_pad``).
* ``layernorm`` / ``rmsnorm`` over the last axis (n < 2**17 values, unit gain): ``d = 128 x - m``
  with ``m = rdiv(128 * sum x, n)`` (layernorm; rmsnorm: 0), so ``|d| < 2**15`` and
  ``out = 16 d sqrt(n) / sqrt(sum d**2 + eps_d)``, ``eps_d = round(eps * n * 2**22)``. A row shift
  ``R = max(0, bitlen(n - 1) + 2 bitlen(max |d|) - 28)`` keeps
  ``q = max(sum rshr(d**2, R) + rshr(eps_d, R), 1) < 2**29`` (exact when R = 0);
  ``q2 = q << (R & 1)``, ``p = (clz(q2) - 2) // 2``, ``s = isqrt(q2 << 2p)`` (digit by digit, the
  exact floor, in ``[2**14, 2**15)``); ``f = rdiv(c << 14, s)`` with ``c = round(sqrt(n) 2**b)``,
  ``b = 15 - ceil(bitlen(n - 1) / 2)``; ``out = sat8(rshr(d * f, 10 + b + (R >> 1) - p))``: one
  square root and one division per row.
* ``softmax`` over the last axis (I-BERT's i-exp): ``x = (s - rowmax) * round(2**12 * scale)``
  (Q16, <= 0), ``z = floor(-x / ln2_16)``, ``r = x + z * ln2_16``, ``t = rshr(r + b_16, 2)``,
  ``e = (rshr(a_15 * rshr(t * t, 14), 15) + c_14) >> z`` (Q14; ``exp(r) ~ 0.3585 (r + 1.353)**2 +
  0.344``), masked keys 0; ``rec = floor(2**30 / max(sum e, 1))``, ``out = rshr(((e * rec) >> 15) * 127,
  15)``: the probability codes ``round(127 p)``. A causal mask lets query ``i`` see keys ``j <= offset + i``.
* ``gelu`` (I-BERT's i-GELU): ``v = min(|x| * round(2**14 / (16 sqrt 2)), c)``, ``c = round(1.769 * 2**14)``,
  ``erf = sign(x) * (2**14 - rshr(a * rshr((v - c)**2, 14), 15))``, ``a = round(0.2888 * 2**15)``;
  ``out = sat8(rshr(x * (2**14 + erf), 15))``.
* ``silu``: a 256-entry table ``T[x] = round(2**11 * silu(x / 16))`` (int16); ``sat8(rshr(T[x], 7))``,
  gated ``sat8(rshr(T[x] * u, 11))``.
* ``rope``: int16 tables ``round(2**14 cos)``, ``round(2**14 sin)`` of each position's angles;
  ``sat8(rshr(x1 * cos - x2 * sin, 14))``, ``sat8(rshr(x1 * sin + x2 * cos, 14))``.

Each op runs as a ``jax.jit`` function named ``vector_op.<kind>.<i>`` (one per kind and
parameter set, so eager calls compile once): the jaxpr shows the op as one ``jit`` equation,
and :func:`marker` gives the tracer its kind and parameters.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from accel_spec import vector_isa
from accel_spec.errors import WorkloadError
from workloads._rope_scaling import inverse_frequencies
from workloads.vector_ops import FRAC_BITS
from workloads.vector_params import _NORM_GUARD, GELU_PARAMS, add_params, norm_params, softmax_params

__all__ = ["add", "mul", "relu", "relu6", "maxpool", "avgpool", "global_avgpool", "layernorm", "rmsnorm",
           "softmax", "gelu", "silu", "rope", "marker", "isqrt", "rshr", "rdiv", "FRAC", "MARKER_PREFIX",
           "add_params", "norm_params", "softmax_params", "GELU_PARAMS", "silu_table", "rope_tables"]

FRAC = FRAC_BITS
MARKER_PREFIX = "vector_op."
_I32 = jnp.int32


# -- integer helpers (all int32) ------------------------------------------------------------------
def rshr(v: jax.Array, s: Any) -> jax.Array:
    """``floor((v + 2**(s-1)) / 2**s)``: a right shift by ``s >= 0`` rounding half up."""
    if isinstance(s, int):
        return v if s == 0 else jnp.right_shift(v + (1 << (s - 1)), s)
    return jnp.right_shift(v + jnp.left_shift(jnp.ones_like(s), s - 1), s)


def rdiv(a: Any, b: Any) -> jax.Array:
    """``round(a / b)`` half up for ``b > 0``: ``floor((a + floor(b / 2)) / b)``."""
    return jnp.floor_divide(a + jnp.right_shift(b, 1), b)


def _sat8(v: jax.Array) -> jax.Array:
    return jnp.clip(v, -128, 127).astype(jnp.int8)


def isqrt(v: jax.Array) -> jax.Array:
    """``floor(sqrt(v))`` of int32 ``v`` in ``[0, 2**31)``, digit by digit (16 steps, no division)."""
    rem, root = v.astype(_I32), jnp.zeros_like(v, _I32)
    bit = 1 << 30
    while bit:
        trial = root + bit
        take = rem >= trial
        rem = jnp.where(take, rem - trial, rem)
        root = jnp.where(take, jnp.right_shift(root, 1) + bit, jnp.right_shift(root, 1))
        bit >>= 2
    return root


# -- the op boundary the tracer sees ----------------------------------------------------------------
_MARKS: dict[str, tuple[str, tuple[tuple[str, int], ...]]] = {}


@functools.cache
def _kernel(kind: str, params: tuple[tuple[str, int], ...]) -> Callable[..., Any]:
    body = functools.partial(_KERNELS[kind], **dict(params))

    def run(*args: jax.Array) -> jax.Array:
        return body(*args)

    run.__name__ = run.__qualname__ = f"{MARKER_PREFIX}{kind}.{len(_MARKS)}"
    _MARKS[run.__name__] = (kind, params)
    return jax.jit(run)


def _run(kind: str, params: dict[str, int], *args: jax.Array) -> jax.Array:
    return _kernel(kind, tuple(params.items()))(*args)


def marker(name: str) -> tuple[str, tuple[tuple[str, int], ...]] | None:
    """``(kind, params)`` of the op a ``jit`` equation named ``name`` runs, or ``None``."""
    return _MARKS.get(name) if name.startswith(MARKER_PREFIX) else None


# -- kernels -----------------------------------------------------------------------------------------
def _add_k(a: jax.Array, b: jax.Array, *, mult_a: int, mult_b: int, shift: int) -> jax.Array:
    return _sat8(rshr(a.astype(_I32) * mult_a + b.astype(_I32) * mult_b, shift))


def _mul_k(a: jax.Array, b: jax.Array, *, shift: int) -> jax.Array:
    return _sat8(rshr(a.astype(_I32) * b.astype(_I32), shift))


def _relu_k(x: jax.Array) -> jax.Array:
    return jnp.maximum(x, jnp.int8(0))


def _relu6_k(x: jax.Array, *, act_max: int) -> jax.Array:
    return jnp.clip(x, jnp.int8(0), jnp.int8(act_max))


def _pool_args(p: dict[str, int]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...]]:
    return ((1, p["window_h"], p["window_w"], 1), (1, p["stride_h"], p["stride_w"], 1),
            ((0, 0), (p["pad_h"], p["pad_h"]), (p["pad_w"], p["pad_w"]), (0, 0)))


def _maxpool_k(x: jax.Array, **p: int) -> jax.Array:
    return lax.reduce_window(x, jnp.int8(-128), lax.max, *_pool_args(p))


def _avgpool_k(x: jax.Array, **p: int) -> jax.Array:
    total = lax.reduce_window(x.astype(_I32), _I32(0), lax.add, *_pool_args(p))
    return _sat8(rdiv(total, p["window_h"] * p["window_w"]))


def _norm_k(x: jax.Array, *, center: int, rsqrt_const: int, rsqrt_bits: int, eps: int) -> jax.Array:
    n = x.shape[-1]
    d = x.astype(_I32) * (1 << _NORM_GUARD)
    if center:
        d = d - rdiv(x.astype(_I32).sum(-1, keepdims=True) * (1 << _NORM_GUARD), n)
    width = 32 - lax.clz(jnp.abs(d).max(-1, keepdims=True))  # bits of the row's largest |d|
    r = jnp.maximum((n - 1).bit_length() + 2 * width - 28, 0)  # so that q < 2**29
    q = jnp.maximum(rshr(d * d, r).sum(-1, keepdims=True) + rshr(jnp.full_like(r, eps), r), 1)
    q = jnp.left_shift(q, r & 1)  # q * 2**r = q2 * 4**(r >> 1), q2 < 2**30
    p = jnp.right_shift(lax.clz(q) - 2, 1)
    f = rdiv(_I32(rsqrt_const << 14), isqrt(jnp.left_shift(q, 2 * p)))
    return _sat8(rshr(d * f, 10 + rsqrt_bits + jnp.right_shift(r, 1) - p))


def _softmax_k(s: jax.Array, *, in_mult: int, ln2: int, poly_b: int, poly_a: int, poly_c: int,
               causal_offset: int) -> jax.Array:
    x = s.astype(_I32)
    if causal_offset >= 0:
        q_pos = lax.broadcasted_iota(_I32, x.shape[-2:], 0)
        k_pos = lax.broadcasted_iota(_I32, x.shape[-2:], 1)
        valid = jnp.broadcast_to(k_pos <= q_pos + causal_offset, x.shape)
    else:
        valid = jnp.ones(x.shape, bool)
    top = jnp.where(valid, x, -128).max(-1, keepdims=True)
    x16 = jnp.where(valid, x - top, 0) * in_mult
    z = jnp.floor_divide(-x16, ln2)
    t = rshr(x16 + z * ln2 + poly_b, 2)
    e = rshr(poly_a * rshr(t * t, 14), 15) + poly_c
    e = jnp.where(valid, jnp.right_shift(e, jnp.minimum(z, 31)), 0)
    rec = jnp.floor_divide(_I32(1 << 30), jnp.maximum(e.sum(-1, keepdims=True), 1))
    return rshr(jnp.right_shift(e * rec, 15) * 127, 15).astype(jnp.int8)


def _gelu_k(x: jax.Array, *, in_mult: int, clip: int, poly_a: int) -> jax.Array:
    q = x.astype(_I32)
    t = jnp.minimum(jnp.abs(q) * in_mult, clip) - clip
    erf = jnp.sign(q) * ((1 << 14) - rshr(poly_a * rshr(t * t, 14), 15))
    return _sat8(rshr(q * ((1 << 14) + erf), 15))


def _silu_k(x: jax.Array, *gate: jax.Array, gated: int) -> jax.Array:
    v = jnp.asarray(silu_table())[x.astype(_I32) + 128]
    return _sat8(rshr(v * gate[0].astype(_I32), 11) if gated else rshr(v, 7))


def _rope_k(x: jax.Array, *, start: int, theta: int, **scaling: int) -> jax.Array:
    _, s, _, dh = x.shape
    half = dh // 2
    cos, sin = (jnp.asarray(t)[None, :, None, :] for t in rope_tables(start, s, half, theta,
                                                                      tuple(scaling.items())))
    v = x.astype(_I32)
    x1, x2 = v[..., :half], v[..., half:]
    return _sat8(jnp.concatenate([rshr(x1 * cos - x2 * sin, 14), rshr(x1 * sin + x2 * cos, 14)], axis=-1))


_KERNELS: dict[str, Callable[..., jax.Array]] = {
    "add": _add_k, "mul": _mul_k, "relu": _relu_k, "relu6": _relu6_k, "maxpool": _maxpool_k,
    "avgpool": _avgpool_k, "layernorm": functools.partial(_norm_k, center=1),
    "rmsnorm": functools.partial(_norm_k, center=0), "softmax": _softmax_k, "gelu": _gelu_k, "silu": _silu_k,
    "rope": _rope_k,
}


@functools.lru_cache(maxsize=1)
def silu_table() -> np.ndarray:
    """``T[c + 128] = round(2**11 * silu(c / 16))`` for codes ``c`` in -128..127 (int32 holding int16):
    the vector unit's ROM, ``accel_spec.vector_isa.silu_table``."""
    return np.array(vector_isa.silu_table(), np.int32)


@functools.lru_cache(maxsize=64)
def rope_tables(start: int, length: int, half: int, theta: int,
                scaling: tuple[tuple[str, int], ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """``round(2**14 cos)``, ``round(2**14 sin)`` of angle ``pos * theta**(-i / half)``, ``(length, half)``;
    with a ``rope`` record's scaling parameters (``scaling``, ``factor_q16``...), the rates of
    :func:`workloads._rope_scaling.inverse_frequencies`."""
    rates = inverse_frequencies(half, theta, dict(scaling), start + length)
    ang = [[(start + p) * r for r in rates] for p in range(length)]
    return (np.array([[round(math.cos(a) * (1 << 14)) for a in row] for row in ang], np.int32),
            np.array([[round(math.sin(a) * (1 << 14)) for a in row] for row in ang], np.int32))


def rope_op_tables(op: Any, length: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rope_tables` of a ``rope`` record ``op`` (its ``start``, ``theta`` and scaling
    parameters) over ``length`` positions of ``half`` rates: the table the host writes for it."""
    scaling = tuple((k, v) for k, v in op.params if k not in ("start", "theta"))
    return rope_tables(op.param("start"), length, half, op.param("theta"), scaling)


def rope_op_rows(op: Any, length: int, lanes: int) -> list[list[int]]:
    """The table operand of a ``rope`` record ``op`` as the host writes it for the vector unit: a row
    a position (``start .. start + length - 1``) of ``2 dh`` int8 codes on ``lanes`` lanes
    (:func:`rope_op_tables` packed by ``accel_spec.vector_isa.rope_table_row``)."""
    cos, sin = rope_op_tables(op, length, op.shape[-1] // 2)
    return [vector_isa.rope_table_row(cos[p].tolist(), sin[p].tolist(), lanes) for p in range(length)]


# -- the ops -----------------------------------------------------------------------------------------
_Q = 1.0 / (1 << FRAC)


def add(a: jax.Array, b: jax.Array, *, scale_a: float = _Q, scale_b: float = _Q, scale_out: float = _Q) -> jax.Array:
    """Residual add of int8 ``a`` (real scale ``scale_a``) and ``b`` -> int8 at ``scale_out``."""
    return _run("add", add_params(scale_a, scale_b, scale_out), a, b)


def mul(a: jax.Array, b: jax.Array) -> jax.Array:
    """Element-wise product of two int8 code tensors, back to int8 codes."""
    return _run("mul", {"shift": FRAC}, a, b)


def relu(x: jax.Array) -> jax.Array:
    """``max(x, 0)``."""
    return _run("relu", {}, x)


def relu6(x: jax.Array) -> jax.Array:
    """``clamp(x, 0, 96)`` (96 is 6.0)."""
    return _run("relu6", {"act_max": 6 << FRAC}, x)


def _pool(kind: str, x: jax.Array, window: tuple[int, int], stride: tuple[int, int], pad: int) -> jax.Array:
    return _run(kind, {"window_h": window[0], "window_w": window[1], "stride_h": stride[0], "stride_w": stride[1],
                       "pad_h": pad, "pad_w": pad}, x)


def maxpool(x: jax.Array, *, window: int, stride: int, pad: int) -> jax.Array:
    """Max pooling over H and W of NHWC int8 ``x``."""
    return _pool("maxpool", x, (window, window), (stride, stride), pad)


def avgpool(x: jax.Array, *, window: int, stride: int, pad: int) -> jax.Array:
    """Average pooling over H and W of NHWC int8 ``x`` (divisor ``window**2``)."""
    return _pool("avgpool", x, (window, window), (stride, stride), pad)


def global_avgpool(x: jax.Array) -> jax.Array:
    """Mean over H and W of NHWC int8 ``x`` -> ``(N, C)``."""
    n, h, w, c = x.shape
    return _pool("avgpool", x, (h, w), (1, 1), 0).reshape(n, c)


def layernorm(x: jax.Array, eps: float = 1e-5) -> jax.Array:
    """LayerNorm over the last axis (unit gain, zero bias)."""
    return _run("layernorm", norm_params(x.shape[-1], eps), x)


def rmsnorm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    """RMSNorm over the last axis (unit gain)."""
    return _run("rmsnorm", norm_params(x.shape[-1], eps), x)


def softmax(scores: jax.Array, *, scale: float = 1.0, causal_offset: int | None = None) -> jax.Array:
    """Softmax of ``scale * scores / 16`` over the last axis -> probability codes ``round(127 p)``.

    ``causal_offset``: query ``i`` (second-last axis) sees keys ``j <= causal_offset + i``
    (the number of cached tokens before the first query); ``None``: every key.
    """
    return _run("softmax", softmax_params(scale, causal_offset), scores)


def gelu(x: jax.Array) -> jax.Array:
    """GELU (the erf form) of int8 codes."""
    return _run("gelu", GELU_PARAMS, x)


def silu(x: jax.Array, gate: jax.Array | None = None) -> jax.Array:
    """SiLU of int8 codes, times ``gate`` (int8 codes) when given (SwiGLU's gating multiply)."""
    if gate is None:
        return _run("silu", {"gated": 0}, x)
    return _run("silu", {"gated": 1}, x, gate)


def rope(x: jax.Array, *, start: int, theta: int = 10000, scaling: tuple[tuple[str, int], ...] = ()) -> jax.Array:
    """Rotary embedding of ``(b, s, h, dh)`` int8 codes at positions ``start, start + 1, ...``
    (``scaling``: a config's RoPE scaling, :func:`workloads._rope_scaling.config_scaling`)."""
    if x.shape[-1] % 2:
        raise WorkloadError(f"rope head size must be even, not {x.shape[-1]}")
    return _run("rope", {"start": start, "theta": theta, **dict(scaling)}, x)
