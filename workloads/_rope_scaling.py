"""RoPE frequencies with a Hugging Face config's ``rope_scaling``, as the unit's table holds them.

The vector unit rotates by a cos/sin table the host writes per position
(:func:`workloads._int_ops.rope_tables`, packed by ``accel_spec.vector_isa.rope_table_row``), so
any set of per-frequency rates is just another table. A ``rope`` record carries ``start`` and
``theta`` and, for a scaled RoPE, these integer parameters (:func:`config_scaling` reads them from
a config; :func:`inverse_frequencies` turns them into rates):

* ``scaling``: 1 ``linear`` (every rate divided by ``factor``: positions interpolated), 2
  ``llama3`` (Llama 3.1's: rates of wavelengths above ``original / low_freq`` divided by
  ``factor``, below ``original / high_freq`` kept, the band between blended linearly in
  ``original / wavelength``), 3 ``dynamic`` (dynamic NTK: while the positions seen, ``start +
  length``, exceed ``original``, the base becomes ``theta * (factor * seen / original - (factor -
  1)) ** (dh / (dh - 2))``);
* ``factor_q16``, ``low_freq_q16``, ``high_freq_q16``: the factors as multiples of ``2**-16``
  (the usual 8, 32, 1, 4 are exact; another factor is taken at that precision);
* ``original``: ``original_max_position_embeddings`` (llama3; dynamic: else the config's
  ``max_position_embeddings``).

Other types (``yarn``, ``longrope``, ``su``...) scale the table's magnitude or need per-frequency
lists; they are named with :data:`UNSCALED` and the table stays unscaled. These three types add no
attention factor (the transformers' ``attention_factor`` is 1 for them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from accel_spec.errors import WorkloadError
from accel_spec.text import shown

__all__ = ["SCALING_CODES", "config_scaling", "config_rope", "inverse_frequencies", "UNSCALED"]

#: ``scaling`` parameter of each rope_scaling type honoured.
SCALING_CODES = {"linear": 1, "llama3": 2, "dynamic": 3}
#: Why a rope_scaling type is not applied (its type follows).
UNSCALED = "RoPE scaling of type {kind!r} not applied (the table here honours linear, llama3 and dynamic)"
_Q16 = 1 << 16


def _number(spec: Mapping[str, object], key: str, what: str, default: float | None = None) -> float:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e9:
        raise WorkloadError(f"{what} rope_scaling {key} must be a positive number, not {value!r}")
    return float(value)


def config_scaling(cfg: Mapping[str, object], what: str) -> tuple[tuple[tuple[str, int], ...], str]:
    """The ``rope`` parameters of the config's RoPE scaling, and why none where a type is not honoured.

    Reads ``rope_scaling`` (``type`` or ``rope_type``) or transformers 5's ``rope_parameters``.

    Returns:
        ``(params, "")``, ``((), "")`` without scaling, or ``((), reason)`` for another type.

    Raises:
        WorkloadError: a honoured type with a missing or bad factor (one line).
    """
    spec = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if not isinstance(spec, Mapping):
        return (), ""
    kind = spec.get("rope_type", spec.get("type", "default"))
    if kind in (None, "default"):
        return (), ""
    if kind not in SCALING_CODES:
        return (), UNSCALED.format(kind=kind)
    params: dict[str, int] = {"scaling": SCALING_CODES[str(kind)],
                              "factor_q16": round(_number(spec, "factor", what) * _Q16)}
    if kind == "llama3":
        params["low_freq_q16"] = round(_number(spec, "low_freq_factor", what) * _Q16)
        params["high_freq_q16"] = round(_number(spec, "high_freq_factor", what) * _Q16)
        if params["high_freq_q16"] <= params["low_freq_q16"]:
            raise WorkloadError(f"{what} rope_scaling high_freq_factor must exceed low_freq_factor")
    if kind in ("llama3", "dynamic"):
        fallback = cfg.get("max_position_embeddings") if kind == "dynamic" else None
        params["original"] = round(_number(spec, "original_max_position_embeddings", what,
                                           fallback if isinstance(fallback, (int, float)) else None))
    return tuple(params.items()), ""


def inverse_frequencies(half: int, theta: float, scaling: Mapping[str, int], seen: int) -> list[float]:
    """The rotation rate (radians per position) of each of the ``half`` frequency pairs.

    Args:
        half: Half the head size.
        theta: The frequency base.
        scaling: The record's scaling parameters (module docstring); empty: plain RoPE.
        seen: Positions seen by the last token (``start + length``; dynamic NTK's sequence length).
    """
    kind = scaling.get("scaling", 0)
    factor = scaling.get("factor_q16", _Q16) / _Q16
    base = theta
    if kind == 3 and seen > scaling["original"]:
        base = theta * (factor * seen / scaling["original"] - (factor - 1)) ** (half / (half - 1)) \
            if half > 1 else theta
    rates = [base ** (-i / half) for i in range(half)]
    if kind == 1:
        return [r / factor for r in rates]
    if kind == 2:
        low, high = scaling["low_freq_q16"] / _Q16, scaling["high_freq_q16"] / _Q16
        original = scaling["original"]
        out = []
        for r in rates:
            wavelength = 2 * math.pi / r
            if wavelength > original / low:
                out.append(r / factor)
            elif wavelength < original / high:
                out.append(r)
            else:
                smooth = (original / wavelength - low) / (high - low)
                out.append((1 - smooth) * r / factor + smooth * r)
        return out
    return rates


def config_rope(cfg: Mapping[str, object], what: str) -> tuple[int, tuple[tuple[str, int], ...], str]:
    """``(theta, scaling parameters, why a scaling is not applied)`` of the config's RoPE
    (``rope_theta``, default 10,000, or transformers 5's ``rope_parameters.rope_theta``, which wins).

    Raises:
        WorkloadError: a bad ``rope_theta`` or scaling factor (one line).
    """
    nested = cfg.get("rope_parameters")
    theta = cfg.get("rope_theta", 10000)
    if isinstance(nested, Mapping) and "rope_theta" in nested:  # transformers 5's spelling, the newer
        theta = nested["rope_theta"]
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not 1 < theta < 2**31:
        raise WorkloadError(f"{what} rope_theta must be a number in (1, 2**31), not {shown(repr(theta), 40)}")
    scaling, unscaled = config_scaling(cfg, what)
    return round(theta), scaling, unscaled
