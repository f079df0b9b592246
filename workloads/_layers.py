"""Layer helpers for the builtin models, in an int8 form and a float form.

Both forms issue the same ``dot_general`` / ``conv_general_dilated`` calls with the same
shapes, so they trace to the same ops; they differ in numbers:

* ``int8``: weights and activations are int8; every matmul and conv is int8 x int8 -> int32
  (``preferred_element_type``), so its result is exact. The int32 result is requantised to int8
  by the output stage (:func:`workloads._requant.output_stage`: Q31 multiplier, rounding right
  shift, zero point, clamp) with parameters derived from the layer's reduction length
  (:func:`workloads._requant.derived_requant`); a ReLU or ReLU6 right after a matmul or conv is
  the output stage's clamp. Everything between matrix ops (residual add, pooling, LayerNorm,
  RMSNorm, softmax, GELU, SiLU, RoPE) is integer-only (:mod:`workloads._int_ops`) on int8 codes
  with 4 fractional bits; each is one ``jit`` the tracer turns into a
  :class:`~workloads.vector_ops.VectorOp`.
* ``float``: float32 weights drawn from ``N(0, 1/fan_in)`` and float32 activations.
* ``float_ref``: the int8 form's weights and inputs (the same draws) as float32 codes, every op
  in float32 with nothing rounded (a requantisation is its real scale), saturating where the
  int8 form saturates (the int8 range, an activation's clamp): the float reference the int8
  form's accuracy is measured against (``bench/int_ops_accuracy.py``).
* ``int8_float_vector``: the int8 form with the vector ops in float32 between the
  requantisations, rounded back to codes (the builtins before the integer ops).

Parameters are drawn from ``jax.random`` with a key per tensor, so they are deterministic for a
seed. Layouts: activations NHWC, conv weights HWIO, dense weights ``(in, out)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from workloads import _int_ops
from workloads._requant import ACTIVATIONS, derived_requant, note_input, output_stage
from workloads._rope_scaling import inverse_frequencies

__all__ = ["Form", "FORMS", "ParamMaker"]

#: int8 activation codes are fixed point with this many fractional bits.
_FRAC_BITS = 4
_SCALE = float(1 << _FRAC_BITS)


@dataclass(frozen=True)
class Form:
    """One numeric form of the builtin models (``FORMS``: "int8", "float", "float_ref", "int8_float_vector")."""

    name: str
    vector: str = "int"  # int8 only: "float" runs the vector ops in float32 between requantisations

    @property
    def is_int8(self) -> bool:
        return self.name == "int8"

    @property
    def int_vector(self) -> bool:
        """The vector ops run in integers (:mod:`workloads._int_ops`): the int8 form's default."""
        return self.is_int8 and self.vector == "int"

    @property
    def codes(self) -> bool:
        """Activations are int8 codes (4 fractional bits), held as int8 or (``float_ref``) float32."""
        return self.name in ("int8", "float_ref")

    @property
    def dtype(self) -> Any:
        """Element type of weights and activations."""
        return jnp.int8 if self.is_int8 else jnp.float32

    @property
    def acc_dtype(self) -> Any:
        """Element type of matmul/conv results before requantisation."""
        return jnp.int32 if self.is_int8 else jnp.float32

    # -- data ---------------------------------------------------------------------------------
    def weight(self, key: jax.Array, shape: tuple[int, ...], fan_in: int) -> jax.Array:
        """A weight tensor: uniform int8 in [-128, 127] (``float_ref``: as float32), or ``N(0, 1/fan_in)`` float32."""
        if self.codes:
            return jax.random.randint(key, shape, -128, 128, dtype=jnp.int32).astype(self.dtype)
        return jax.random.normal(key, shape, jnp.float32) / math.sqrt(fan_in)

    def activation(self, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        """An input activation tensor: uniform int8 (``float_ref``: as float32), or ``N(0, 1)`` float32."""
        if self.codes:
            return jax.random.randint(key, shape, -128, 128, dtype=jnp.int32).astype(self.dtype)
        return jax.random.normal(key, shape, jnp.float32)

    # -- quantisation -------------------------------------------------------------------------
    def requant(self, acc: jax.Array, k: int, activation: str | None = None) -> jax.Array:
        """Bring an accumulator of ``k``-long dot products back to the activation type.

        int8: the output stage with :func:`derived_requant` parameters (noted for the tracer);
        float_ref: ``acc`` times the same parameters' real scale, clamped as the output stage clamps;
        float: ``acc`` through ``activation`` (``None``, ``"relu"`` or ``"relu6"``).
        """
        if self.is_int8:
            return output_stage(acc, derived_requant(k, activation))
        if self.codes:
            rq = derived_requant(k, activation)
            lo, hi = ACTIVATIONS[activation]
            y = acc * (rq.multiplier[0] * 2.0 ** -(31 + rq.shift[0]))
            return jnp.clip(y, -128 if lo is None else lo, 127 if hi is None else hi)
        if activation is None:
            return acc
        return jnp.maximum(acc, 0.0) if activation == "relu" else jnp.clip(acc, 0.0, 6.0)

    def to_float(self, x: jax.Array) -> jax.Array:
        """Activation codes as float32 values (int8, float_ref: fixed point with 4 fractional bits)."""
        return x.astype(jnp.float32) / _SCALE if self.codes else x

    def from_float(self, y: jax.Array) -> jax.Array:
        """Float32 values back to activation codes (int8: round and saturate; float_ref: saturate only)."""
        if self.is_int8:
            return jnp.clip(jnp.round(y * _SCALE), -128, 127).astype(jnp.int8)
        return jnp.clip(y * _SCALE, -128, 127) if self.codes else y

    # -- matrix work --------------------------------------------------------------------------
    def dense(self, x: jax.Array, w: jax.Array, activation: str | None = None) -> jax.Array:
        """``x[..., k] @ w[k, n]``, requantised (with a fused ``activation``)."""
        note_input(x)
        acc = lax.dot_general(x, w, (((x.ndim - 1,), (0,)), ((), ())), preferred_element_type=self.acc_dtype)
        return self.requant(acc, w.shape[0], activation)

    def dot(self, a: jax.Array, b: jax.Array, dims: Any, k: int) -> jax.Array:
        """``lax.dot_general(a, b, dims)`` (``a`` is the GEMM's A), requantised for contraction ``k``."""
        note_input(a)
        return self.requant(lax.dot_general(a, b, dims, preferred_element_type=self.acc_dtype), k)

    def einsum(self, spec: str, a: jax.Array, b: jax.Array, k: int) -> jax.Array:
        """``jnp.einsum(spec, a, b)`` with exact accumulation, requantised for contraction length ``k``."""
        note_input(None)  # which operand einsum makes the GEMM's A is its choice: never chained
        acc = jnp.einsum(spec, a, b, preferred_element_type=self.acc_dtype)
        return self.requant(acc, k)

    def conv(self, x: jax.Array, w: jax.Array, *, stride: int = 1, pad: int = 0, groups: int = 1,
             activation: str | None = None) -> jax.Array:
        """2-D convolution of NHWC ``x`` with HWIO ``w``, symmetric padding ``pad``, requantised
        (with a fused ``activation``)."""
        note_input(x)
        acc = lax.conv_general_dilated(
            x, w, (stride, stride), ((pad, pad), (pad, pad)),
            dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups,
            preferred_element_type=self.acc_dtype,
        )
        return self.requant(acc, w.shape[0] * w.shape[1] * w.shape[2], activation)

    # -- element-wise and reductions (int8: integer-only, workloads._int_ops) -----------------
    def add(self, a: jax.Array, b: jax.Array) -> jax.Array:
        """Residual add (int8: of two 4-fractional-bit inputs, rounded and saturating)."""
        if self.int_vector:
            return _int_ops.add(a, b)
        return self.from_float(self.to_float(a) + self.to_float(b))

    def relu(self, x: jax.Array) -> jax.Array:
        return _int_ops.relu(x) if self.int_vector else jnp.maximum(x, jnp.zeros((), x.dtype))

    def relu6(self, x: jax.Array) -> jax.Array:
        if self.int_vector:
            return _int_ops.relu6(x)
        six = jnp.asarray(6 * _SCALE if self.codes else 6.0, x.dtype)
        return jnp.clip(x, jnp.zeros((), x.dtype), six)

    def gelu(self, x: jax.Array) -> jax.Array:
        """GELU, the erf form (int8: I-BERT's integer polynomial)."""
        if self.int_vector:
            return _int_ops.gelu(x)
        return self.from_float(jax.nn.gelu(self.to_float(x), approximate=False))

    def silu(self, x: jax.Array, gate: jax.Array | None = None) -> jax.Array:
        """SiLU, times ``gate`` when given (SwiGLU's gating multiply)."""
        if self.int_vector:
            return _int_ops.silu(x, gate)
        y = jax.nn.silu(self.to_float(x))
        return self.from_float(y if gate is None else y * self.to_float(gate))

    def mul(self, a: jax.Array, b: jax.Array) -> jax.Array:
        """Element-wise product of two activations."""
        if self.int_vector:
            return _int_ops.mul(a, b)
        return self.from_float(self.to_float(a) * self.to_float(b))

    def layernorm(self, x: jax.Array) -> jax.Array:
        """Layer normalisation over the last axis (unit gain, zero bias, eps 1e-5)."""
        if self.int_vector:
            return _int_ops.layernorm(x)
        v = self.to_float(x)
        mean = v.mean(-1, keepdims=True)
        var = ((v - mean) ** 2).mean(-1, keepdims=True)
        return self.from_float((v - mean) * lax.rsqrt(var + 1e-5))

    def rmsnorm(self, x: jax.Array) -> jax.Array:
        """RMS normalisation over the last axis (unit gain, eps 1e-6)."""
        if self.int_vector:
            return _int_ops.rmsnorm(x)
        v = self.to_float(x)
        return self.from_float(v * lax.rsqrt((v * v).mean(-1, keepdims=True) + 1e-6))

    def softmax(self, scores: jax.Array, *, scale: float = 1.0, causal_offset: int | None = None) -> jax.Array:
        """Softmax of ``scale * scores`` over the last axis; with ``causal_offset``, query ``i``
        sees keys ``j <= causal_offset + i`` only.

        int8 (and float_ref) probabilities are the codes ``round(p * 127)`` (0..127).
        """
        if self.int_vector:
            return _int_ops.softmax(scores, scale=scale, causal_offset=causal_offset)
        s = self.to_float(scores) * scale
        if causal_offset is not None:
            q_pos = jnp.arange(s.shape[-2])[:, None]
            s = jnp.where(jnp.arange(s.shape[-1])[None, :] <= causal_offset + q_pos, s, -jnp.inf)
        p = jax.nn.softmax(s, axis=-1)
        if self.is_int8:
            return jnp.round(p * 127).astype(jnp.int8)
        return p * 127 if self.codes else p

    def rope(self, x: jax.Array, start: int, theta: int = 10000,
             scaling: tuple[tuple[str, int], ...] = ()) -> jax.Array:
        """Rotary position embedding of ``(b, s, h, dh)`` activations at positions ``start, start+1, ...``
        (frequency base ``theta``; ``scaling``: :func:`workloads._rope_scaling.config_scaling`'s parameters)."""
        if self.int_vector:
            return _int_ops.rope(x, start=start, theta=theta, scaling=scaling)
        _, s, _, dh = x.shape
        half = dh // 2
        inv_freq = np.array(inverse_frequencies(half, theta, dict(scaling), start + s))
        angles = np.arange(start, start + s, dtype=np.float64)[:, None] * inv_freq[None, :]
        cos = jnp.asarray(np.cos(angles), jnp.float32)[None, :, None, :]
        sin = jnp.asarray(np.sin(angles), jnp.float32)[None, :, None, :]
        v = self.to_float(x)
        x1, x2 = v[..., :half], v[..., half:]
        return self.from_float(jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1))

    def maxpool(self, x: jax.Array, *, window: int, stride: int, pad: int) -> jax.Array:
        """Max pooling over H and W of NHWC ``x``."""
        if self.int_vector:
            return _int_ops.maxpool(x, window=window, stride=stride, pad=pad)
        init = jnp.asarray(-128 if self.is_int8 else -jnp.inf, x.dtype)
        return lax.reduce_window(x, init, lax.max, (1, window, window, 1),
                                 (1, stride, stride, 1), ((0, 0), (pad, pad), (pad, pad), (0, 0)))

    def global_avgpool(self, x: jax.Array) -> jax.Array:
        """Mean over H and W of NHWC ``x`` -> ``(N, C)`` (int8: rounded half up)."""
        if self.int_vector:
            return _int_ops.global_avgpool(x)
        return self.from_float(self.to_float(x).mean(axis=(1, 2)))


#: ``int8_float_vector``: the int8 form with the vector ops in float32 between the requantisations
#: (rounded back to codes), as before the integer ops: isolates their share of the error.
FORMS = {"int8": Form("int8"), "float": Form("float"), "float_ref": Form("float_ref"),
         "int8_float_vector": Form("int8", vector="float")}


class ParamMaker:
    """Hands out a fresh deterministic key per parameter tensor (``fold_in`` of a counter)."""

    def __init__(self, key: jax.Array, form: Form) -> None:
        self._key = key
        self._form = form
        self._count = 0

    def _next(self) -> jax.Array:
        self._count += 1
        return jax.random.fold_in(self._key, self._count)

    def weight(self, shape: tuple[int, ...], fan_in: int) -> jax.Array:
        return self._form.weight(self._next(), shape, fan_in)

    def activation(self, shape: tuple[int, ...]) -> jax.Array:
        return self._form.activation(self._next(), shape)

    def tokens(self, shape: tuple[int, ...], vocab: int) -> jax.Array:
        return jax.random.randint(self._next(), shape, 0, vocab, dtype=jnp.int32)
