"""The integer parameters of the vector ops (stdlib only, no JAX): how the builtins' int8 form,
and the ONNX import for graphs that give no quantisation, turn real scales and constants into the
integers :mod:`workloads._int_ops` computes with (its docstring states each algorithm)."""

from __future__ import annotations

import math

from accel_spec.errors import WorkloadError
from workloads.vector_ops import FRAC_BITS

__all__ = ["add_params", "norm_params", "softmax_params", "GELU_PARAMS", "UNIT_SCALE", "default_params"]

FRAC = FRAC_BITS
#: The real scale of an activation code (value = code / 16).
UNIT_SCALE = 1.0 / (1 << FRAC)
_ADD_SHIFT = 14
_NORM_GUARD = 7  # extra fractional bits of the centred values d (|d| < 2**15)
#: I-BERT's second-order fits: exp(r) ~ a (r + b)**2 + c on (-ln 2, 0]; erf(v) ~ 1 + a (min(v, -b) + b)**2.
_EXP_A, _EXP_B, _EXP_C = 0.3585, 1.353, 0.344
_ERF_A, _ERF_B = -0.2888, -1.769


def add_params(scale_a: float, scale_b: float, scale_out: float) -> dict[str, int]:
    """``mult_a``, ``mult_b``, ``shift`` of a rescaling add (each ratio ``scale_in / scale_out``
    in ``[2**-8, 2**8]``, so every term stays below ``2**30``)."""
    out = {}
    for key, scale in (("mult_a", scale_a), ("mult_b", scale_b)):
        ratio = scale / scale_out if scale_out > 0 else math.inf
        if not 2.0**-8 <= ratio <= 2.0**8:
            raise WorkloadError(f"add input/output scale ratio must be in [2**-8, 2**8], not {ratio!r}")
        out[key] = round(ratio * (1 << _ADD_SHIFT))
    return out | {"shift": _ADD_SHIFT}


def norm_params(n: int, eps: float) -> dict[str, int]:
    """``rsqrt_const = round(sqrt(n) * 2**rsqrt_bits)`` (in ``[2**14, 2**15]``), ``rsqrt_bits`` and
    ``eps`` (``eps * n`` in units of ``d**2``) of a normalisation over ``n < 2**17`` values."""
    if not 1 <= n < 1 << 17:
        raise WorkloadError(f"normalised rows must hold 1 to 2**17 - 1 values, not {n}")
    bits = 15 - ((n - 1).bit_length() + 1) // 2
    return {"rsqrt_const": round(math.sqrt(n) * (1 << bits)), "rsqrt_bits": bits,
            "eps": round(eps * n * (1 << 2 * (FRAC + _NORM_GUARD)))}


def softmax_params(scale: float, causal_offset: int | None) -> dict[str, int]:
    """The i-exp constants for scores scaled by ``scale`` (in ``(0, 1024]``) and the mask offset."""
    if not 0 < scale <= 1024:
        raise WorkloadError(f"softmax scale must be in (0, 1024], not {scale!r}")
    return {"in_mult": round(scale * (1 << (16 - FRAC))), "ln2": round(math.log(2) * (1 << 16)),
            "poly_b": round(_EXP_B * (1 << 16)), "poly_a": round(_EXP_A * (1 << 15)),
            "poly_c": round(_EXP_C * (1 << 14)), "causal_offset": -1 if causal_offset is None else int(causal_offset)}


GELU_PARAMS = {"in_mult": round((1 << 14) / ((1 << FRAC) * math.sqrt(2))), "clip": round(-_ERF_B * (1 << 14)),
               "poly_a": round(-_ERF_A * (1 << 15))}


def default_params(kind: str, row: int, eps: float = 1e-5) -> dict[str, int]:
    """The parameters the builtins' int8 form gives a ``kind`` op whose rows hold ``row`` values, at
    the activation scale: a same-scale residual add, a unit-scale softmax without a mask, GELU,
    a normalisation with ``eps``, ReLU6 at 6.0. Pools and RoPE take their window or positions
    from the graph, not from here (``{}``)."""
    if kind == "add":
        return add_params(UNIT_SCALE, UNIT_SCALE, UNIT_SCALE)
    if kind in ("layernorm", "rmsnorm"):
        return norm_params(row, eps)
    if kind == "softmax":
        return softmax_params(1.0, None)
    if kind == "gelu":
        return dict(GELU_PARAMS)
    if kind == "mul":
        return {"shift": FRAC}
    if kind == "relu6":
        return {"act_max": 6 << FRAC}
    return {}
