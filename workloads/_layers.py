"""Layer helpers for the builtin models, in an int8 form and a float form.

Both forms issue the same ``dot_general`` / ``conv_general_dilated`` calls with the same
shapes, so they trace to the same ops; they differ in numbers:

* ``int8``: weights and activations are int8; every matmul and conv is int8 x int8 -> int32
  (``preferred_element_type``), so its result is exact. The int32 result is requantised to int8
  by the output stage (:func:`workloads._requant.output_stage`: Q31 multiplier, rounding right
  shift, zero point, clamp) with parameters derived from the layer's reduction length
  (:func:`workloads._requant.derived_requant`); a ReLU or ReLU6 right after a matmul or conv is
  the output stage's clamp. Non-linear functions (softmax, GELU, normalisation) run in float32 on
  the int8 codes read as fixed point with 4 fractional bits and are quantised back.
* ``float``: float32 weights drawn from ``N(0, 1/fan_in)`` and float32 activations.

Parameters are drawn from ``jax.random`` with a key per tensor, so they are deterministic for a
seed. Layouts: activations NHWC, conv weights HWIO, dense weights ``(in, out)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from workloads._requant import derived_requant, note_input, output_stage

__all__ = ["Form", "FORMS", "ParamMaker"]

#: int8 activation codes are fixed point with this many fractional bits.
_FRAC_BITS = 4
_SCALE = float(1 << _FRAC_BITS)


@dataclass(frozen=True)
class Form:
    """One numeric form of the builtin models ("int8" or "float")."""

    name: str

    @property
    def is_int8(self) -> bool:
        return self.name == "int8"

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
        """A weight tensor: uniform int8 in [-128, 127], or ``N(0, 1/fan_in)`` float32."""
        if self.is_int8:
            return jax.random.randint(key, shape, -128, 128, dtype=jnp.int32).astype(jnp.int8)
        return jax.random.normal(key, shape, jnp.float32) / math.sqrt(fan_in)

    def activation(self, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        """An input activation tensor: uniform int8, or ``N(0, 1)`` float32."""
        if self.is_int8:
            return jax.random.randint(key, shape, -128, 128, dtype=jnp.int32).astype(jnp.int8)
        return jax.random.normal(key, shape, jnp.float32)

    # -- quantisation -------------------------------------------------------------------------
    def requant(self, acc: jax.Array, k: int, activation: str | None = None) -> jax.Array:
        """Bring an accumulator of ``k``-long dot products back to the activation type.

        int8: the output stage with :func:`derived_requant` parameters (noted for the tracer);
        float: ``acc`` through ``activation`` (``None``, ``"relu"`` or ``"relu6"``).
        """
        if not self.is_int8:
            if activation is None:
                return acc
            return self.relu(acc) if activation == "relu" else self.relu6(acc)
        return output_stage(acc, derived_requant(k, activation))

    def to_float(self, x: jax.Array) -> jax.Array:
        """Activation codes as float32 values (int8: fixed point with 4 fractional bits)."""
        return x.astype(jnp.float32) / _SCALE if self.is_int8 else x

    def from_float(self, y: jax.Array) -> jax.Array:
        """Float32 values back to activation codes (int8: round and saturate)."""
        if not self.is_int8:
            return y
        return jnp.clip(jnp.round(y * _SCALE), -128, 127).astype(jnp.int8)

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

    # -- element-wise and reductions ----------------------------------------------------------
    def add(self, a: jax.Array, b: jax.Array) -> jax.Array:
        """Residual add (int8: saturating)."""
        if not self.is_int8:
            return a + b
        return jnp.clip(a.astype(jnp.int16) + b.astype(jnp.int16), -128, 127).astype(jnp.int8)

    def relu(self, x: jax.Array) -> jax.Array:
        return jnp.maximum(x, jnp.zeros((), x.dtype))

    def relu6(self, x: jax.Array) -> jax.Array:
        six = jnp.asarray(6 * _SCALE if self.is_int8 else 6.0, x.dtype)
        return jnp.clip(x, jnp.zeros((), x.dtype), six)

    def gelu(self, x: jax.Array) -> jax.Array:
        return self.from_float(jax.nn.gelu(self.to_float(x)))

    def silu(self, x: jax.Array) -> jax.Array:
        return self.from_float(jax.nn.silu(self.to_float(x)))

    def mul(self, a: jax.Array, b: jax.Array) -> jax.Array:
        """Element-wise product of two activations (SwiGLU's gate)."""
        return self.from_float(self.to_float(a) * self.to_float(b))

    def layernorm(self, x: jax.Array) -> jax.Array:
        """Layer normalisation over the last axis (unit gain, zero bias)."""
        v = self.to_float(x)
        mean = v.mean(-1, keepdims=True)
        var = ((v - mean) ** 2).mean(-1, keepdims=True)
        return self.from_float((v - mean) * lax.rsqrt(var + 1e-5))

    def rmsnorm(self, x: jax.Array) -> jax.Array:
        """RMS normalisation over the last axis (unit gain)."""
        v = self.to_float(x)
        return self.from_float(v * lax.rsqrt((v * v).mean(-1, keepdims=True) + 1e-6))

    def softmax(self, scores: jax.Array, *, scale: float = 1.0, mask: jax.Array | None = None) -> jax.Array:
        """Softmax of ``scale * scores`` over the last axis, where ``mask`` is true.

        int8 probabilities are the codes ``round(p * 127)`` (0..127).
        """
        s = self.to_float(scores) * scale
        if mask is not None:
            s = jnp.where(mask, s, -1e30)
        p = jax.nn.softmax(s, axis=-1)
        if not self.is_int8:
            return p
        return jnp.round(p * 127).astype(jnp.int8)

    def maxpool(self, x: jax.Array, *, window: int, stride: int, pad: int) -> jax.Array:
        """Max pooling over H and W of NHWC ``x``."""
        init = jnp.asarray(-128 if self.is_int8 else -jnp.inf, x.dtype)
        return lax.reduce_window(x, init, lax.max, (1, window, window, 1), (1, stride, stride, 1),
                                 ((0, 0), (pad, pad), (pad, pad), (0, 0)))

    def global_avgpool(self, x: jax.Array) -> jax.Array:
        """Mean over H and W of NHWC ``x`` -> ``(N, C)`` (int8: floor of the int32 mean)."""
        if not self.is_int8:
            return x.mean(axis=(1, 2))
        total = x.astype(jnp.int32).sum(axis=(1, 2))
        return (total // (x.shape[1] * x.shape[2])).astype(jnp.int8)


FORMS = {"int8": Form("int8"), "float": Form("float")}


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
