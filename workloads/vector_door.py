"""Reference of the vector unit's door (``accel_spec.vector_door``): a vector op on a design whose
activations are fp8 or int4, bit for bit as the RTL (``rtl_gen.core.vector_door``) computes it.

numpy and ``ml_dtypes`` only (JAX refuses int4 matrix products; the door needs none): float codes are
decoded exactly to float64 (``workloads.format_codes.from_codes``), scaled by ``2**UNIT_FRAC_BITS``
and rounded by ``np.rint`` (nearest, ties to even) then clamped to int8; the way back divides the
int8 code exactly and rounds once to the format (``workloads.formats.quantise``: ``ml_dtypes``,
nearest even). int4: ``c * 16`` in, ``clip(rint(q / 16), -8, 7)`` out. The int8 op between is the
workload's own integer definition (``workloads._int_ops``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accel_spec.errors import WorkloadError
from accel_spec.number_formats import FORMATS, NumberFormat
from accel_spec.vector_door import INT4_SHIFT, RAW_KINDS, RAW_SECOND_KINDS, UNIT_FRAC_BITS
from workloads.format_codes import from_codes, to_codes
from workloads.formats import quantise

__all__ = ["to_unit", "from_unit", "door_vector_op"]


def _fmt(name: str) -> NumberFormat:
    f = FORMATS.get(name)
    if f is None or (f.is_int and f.bits != 4) or (f.bits == 16 and f.name != "bf16"):
        raise WorkloadError(f"the vector unit's door converts fp8_e4m3, fp8_e5m2, int4 or bf16, not {name!r}")
    return f


def to_unit(codes: np.ndarray, fmt: str) -> np.ndarray:
    """The unit's int8 codes (int64 array) of activation ``codes`` in ``fmt`` (int8/int16-held codes or int4 values)."""
    f = _fmt(fmt)
    c = np.asarray(codes).astype(np.int64)
    if f.is_int:
        return c << INT4_SHIFT
    v = from_codes(c, f) * float(1 << UNIT_FRAC_BITS)
    return np.clip(np.rint(v), -128, 127).astype(np.int64)


def from_unit(q: np.ndarray, fmt: str) -> np.ndarray:
    """The activation codes in ``fmt`` (int64 array: int8/int16-held codes, or int4 values) of the unit's int8 ``q``."""
    f = _fmt(fmt)
    q = np.asarray(q).astype(np.int64)
    if f.is_int:
        lim = 1 << (f.bits - 1)
        return np.clip(np.rint(q / float(1 << INT4_SHIFT)), -lim, lim - 1).astype(np.int64)
    values = quantise(q / float(1 << UNIT_FRAC_BITS), f)
    values = np.where(values == 0, 0.0, values)  # +0 for a zero code
    return to_codes(values, f).astype(np.int64)


def door_vector_op(kind: str, params: dict[str, int], fmt: str | None, *args: np.ndarray) -> np.ndarray:
    """Vector op ``kind`` with ``params`` (``workloads._int_ops``) on activation codes ``args`` of a
    design whose activations are ``fmt`` (``None``: int8, no door), as int64 codes in ``fmt``."""
    import jax.numpy as jnp

    from workloads._int_ops import _run

    if fmt is None or kind in RAW_KINDS:
        return np.asarray(_run(kind, dict(params), *(jnp.asarray(np.asarray(a).astype(np.int8)) for a in args))
                          ).astype(np.int64)
    ins: list[Any] = [to_unit(a, fmt) if i == 0 or kind not in RAW_SECOND_KINDS else np.asarray(a)
                      for i, a in enumerate(args)]
    out = np.asarray(_run(kind, dict(params), *(jnp.asarray(x.astype(np.int8)) for x in ins))).astype(np.int64)
    return from_unit(out, fmt)
