"""The output stage's parameters as an op's record: :class:`Requant` (stdlib only, no JAX).

An op (``workloads.ops``) carries one as its ``requant`` field; ``workloads._requant`` holds its
arithmetic in JAX, ``rtl_gen.OutputStage`` in the RTL. Importable from ``workloads.ops`` and
``workloads`` too.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from accel_spec.errors import WorkloadError

__all__ = ["Requant", "REQUANT_ROUNDING"]

#: How the output stage rounds (see :class:`Requant`).
REQUANT_ROUNDING = "round half up (toward +infinity), one rounding of acc * multiplier / 2**(31 + shift)"

_INT32 = (-(1 << 31), (1 << 31) - 1)


def _int_tuple(name: str, value: object, low: int, high: int, rule: str) -> tuple[int, ...]:
    """``value`` (an int or a non-empty sequence of ints) as a tuple, each in ``[low, high]``."""
    items = (value,) if isinstance(value, numbers.Integral) else value
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise WorkloadError(f"requant {name} must be {rule} or a non-empty list of them, not {value!r}")
    out = []
    for item in items:  # type: ignore[union-attr]
        if isinstance(item, bool) or not isinstance(item, numbers.Integral) or not low <= int(item) <= high:
            raise WorkloadError(f"requant {name} must be {rule}, not {item!r}")
        out.append(int(item))
    if not out:
        raise WorkloadError(f"requant {name} must hold at least one value, not none")
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class Requant:
    """Integer-only requantisation of an op's accumulators to ``bits``-bit outputs (gemmlowp / TFLite style).

    For output channel ``c`` and an accumulator ``acc`` (the exact sum of products), the output is::

        x = clamp(acc + bias[c], -2**31, 2**31 - 1)                  # int32, saturating
        y = floor((x * multiplier[c] + 2**(30 + s)) / 2**(31 + s))   # s = shift[c]; exact integers
        q = min(max(y + zero_point, act_min), act_max)               # act_min/act_max within bits

    ``multiplier`` is a Q31 fixed-point number (``multiplier / 2**31``, TFLite's quantised
    multiplier, normally in ``[2**30, 2**31)``), ``shift`` a right shift of 0..31, so the real
    scale is ``multiplier * 2**-(31 + shift)``. Rounding: :data:`REQUANT_ROUNDING` -- a single
    rounding as TFLite's ``MultiplyByQuantizedMultiplier`` with ``TFLITE_SINGLE_ROUNDING``; it
    differs from gemmlowp's double rounding (``SaturatingRoundingDoublingHighMul`` then
    ``RoundingDivideByPOT``, half away from zero) on some ties. ``x * multiplier + 2**(30 + s)``
    fits a signed 64-bit integer for every int32 ``x`` and ``multiplier``. ReLU is
    ``act_min = zero_point``, ReLU6 ``act_max = zero_point + round(6 / scale)``; the defaults
    saturate to the full ``bits`` range.

    Per-channel fields hold one value (broadcast to every channel) or one per output channel of
    the op (see :meth:`channel_values`). Tuples keep the record hashable.

    Attributes:
        multiplier: int32 Q31 multipliers.
        shift: right shifts, 0..31.
        bias: int32 biases added to the accumulator (default 0).
        zero_point: output zero point, in the ``bits`` range.
        act_min, act_max: output clamp bounds (default: the ``bits`` range), ``act_min <= act_max``.
        bits: output width in bits (2..16; the int8 workloads use 8).
    """

    multiplier: tuple[int, ...]
    shift: tuple[int, ...]
    bias: tuple[int, ...] = (0,)
    zero_point: int = 0
    act_min: int | None = None
    act_max: int | None = None
    bits: int = 8

    def __post_init__(self) -> None:
        bits = self.bits
        if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or not 2 <= int(bits) <= 16:
            raise WorkloadError(f"requant bits must be an integer in [2, 16], not {bits!r}")
        lo, hi = -(1 << (int(bits) - 1)), (1 << (int(bits) - 1)) - 1
        object.__setattr__(self, "bits", int(bits))
        object.__setattr__(self, "multiplier",
                           _int_tuple("multiplier", self.multiplier, *_INT32, "an int32 (Q31 multiplier)"))
        object.__setattr__(self, "shift", _int_tuple("shift", self.shift, 0, 31, "an integer in [0, 31]"))
        object.__setattr__(self, "bias", _int_tuple("bias", self.bias, *_INT32, "an int32"))
        rng = f"an integer in [{lo}, {hi}] (the {bits}-bit output range)"
        for name, default in (("zero_point", 0), ("act_min", lo), ("act_max", hi)):
            value = getattr(self, name)
            value = default if value is None else value
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= int(value) <= hi:
                raise WorkloadError(f"requant {name} must be {rng}, not {value!r}")
            object.__setattr__(self, name, int(value))
        if self.bounds[0] > self.bounds[1]:
            raise WorkloadError(f"requant act_min must be <= act_max, not {self.act_min} > {self.act_max}")
        lengths = {len(t) for t in (self.multiplier, self.shift, self.bias)} - {1}
        if len(lengths) > 1:
            raise WorkloadError("requant multiplier, shift and bias must each hold one value or the same number "
                                f"of channels, not {len(self.multiplier)}, {len(self.shift)} and {len(self.bias)}")

    @property
    def bounds(self) -> tuple[int, int]:
        """``(act_min, act_max)`` as ints (``None`` given at construction becomes the range's end)."""
        return int(self.act_min or 0), int(self.act_max or 0)

    @property
    def channels(self) -> int:
        """Channels the per-channel fields describe (1: one value for every channel)."""
        return max(len(self.multiplier), len(self.shift), len(self.bias))

    def channel_values(self, name: str, count: int, start: int = 0) -> tuple[int, ...]:
        """Field ``name`` (``"multiplier"``, ``"shift"`` or ``"bias"``) for channels ``start .. start+count-1``."""
        values: tuple[int, ...] = getattr(self, name)
        if len(values) == 1:
            return values * count
        return values[start:start + count]

    def check_channels(self, owner: str, allowed: tuple[int, ...]) -> None:
        """Raise ``WorkloadError`` unless :attr:`channels` is 1 or one of ``allowed``."""
        if self.channels != 1 and self.channels not in allowed:
            want = " or ".join(str(a) for a in sorted(set(allowed)))
            raise WorkloadError(f"{owner} requant must give 1 or {want} per-channel values, not {self.channels}")
