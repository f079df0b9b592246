"""Operand number formats: the table of known formats and the rules of which ones the RTL builds.

A leaf (standard library and :mod:`accel_spec.errors` only): :mod:`accel_spec.config` reads it, the
reference semantics (``workloads.formats``) and the accuracy metric take their figures from it.

Each :class:`NumberFormat` gives its encoding (sign, exponent and mantissa bits, exponent bias),
the largest finite magnitude, the smallest subnormal and whether the encoding has infinities, and
its accumulator: integer formats keep an exact signed integer accumulator (``acc_bits``); fp8_e4m3
an exact fixed-point accumulator (products of two E4M3 values are exact, so is their sum: the
result does not depend on the order of summation); bf16 and fp8_e5m2 an IEEE float32 accumulator
summed in a fixed order (``workloads.formats`` states it; an E5M2 product is exact in float32, but
an exact fixed-point sum of E5M2 products needs 65 bits plus ``log2(K)``, beyond ``acc_bits <= 64``).
docs/formats.md has the reasoning.

Which operand pairs the generated hardware builds today (:func:`build_rule`): integer operands,
each lane of the datapath ``input_bits = max(8, widest operand)`` bits wide (an int4 operand
sign-extended in an 8-bit lane, its range the int4 range); fp8_e4m3 for both operands (an exact
fixed-point accumulator); bf16 for both operands (16-bit lanes, a float32 accumulator,
``acc_bits = 32``); fp8_e5m2 for both operands (8-bit lanes, a float32 accumulator, ``acc_bits = 32``).
"""

from __future__ import annotations

import dataclasses
import math

from accel_spec.errors import ConfigError

__all__ = ["NumberFormat", "FORMATS", "FORMAT_NAMES", "AUTO", "parse_format", "datapath_bits", "build_rule", "pe_cell",
           "int_format", "pair_problem", "pair_input_bits", "format_tag", "product_bits", "max_product",
           "accumulator_rule"]

#: The value of ``weight_format`` / ``act_format`` that means "signed integer of ``input_bits``".
AUTO = "auto"


@dataclasses.dataclass(frozen=True)
class NumberFormat:
    """One operand format.

    Attributes:
        name: the name a design uses (``"fp8_e4m3"``).
        kind: ``"int"`` (two's complement) or ``"float"``.
        bits: bits of one element as stored (4, 8 or 16).
        exponent_bits: float exponent field width (0 for integers).
        mantissa_bits: float stored mantissa (fraction) width; for integers ``bits - 1``.
        max_finite: largest finite magnitude (integers: ``2**(bits-1) - 1``; the most negative
            integer is ``-2**(bits-1)``).
        min_subnormal: smallest positive magnitude (1 for integers).
        has_inf: whether the encoding holds infinities (e5m2, bf16; not e4m3fn).
        accumulator: the accumulator kind: ``"int"``, ``"fixed"`` (exact fixed point) or ``"fp32"``.
        ml_dtype: the ``ml_dtypes`` type name that encodes it (``"int4"``, ``"float8_e4m3fn"``...).
    """

    name: str
    kind: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    max_finite: float
    min_subnormal: float
    has_inf: bool
    accumulator: str
    ml_dtype: str

    @property
    def is_int(self) -> bool:
        """Whether this is a two's-complement integer format."""
        return self.kind == "int"

    @property
    def bias(self) -> int:
        """Exponent bias of a float format (0 for integers)."""
        return (1 << (self.exponent_bits - 1)) - 1 if self.exponent_bits else 0

    @property
    def bytes_per_element(self) -> float:
        """Bytes one element takes when packed (int4: 0.5)."""
        return self.bits / 8


def _int(bits: int) -> NumberFormat:
    top = (1 << (bits - 1)) - 1
    return NumberFormat(f"int{bits}", "int", bits, 0, bits - 1, float(top), 1.0, False, "int", f"int{bits}")


#: Known formats by name. fp8_e4m3 is OCP's E4M3FN (no infinities, one NaN code per sign: the
#: largest finite is 448); fp8_e5m2 is IEEE-like (infinities, largest finite 57344); bf16 is
#: float32's top 16 bits.
FORMATS: dict[str, NumberFormat] = {f.name: f for f in (
    _int(4), _int(8), _int(16),
    NumberFormat("fp8_e4m3", "float", 8, 4, 3, 448.0, 2.0 ** -9, False, "fixed", "float8_e4m3fn"),
    NumberFormat("fp8_e5m2", "float", 8, 5, 2, 57344.0, 2.0 ** -16, True, "fp32", "float8_e5m2"),
    NumberFormat("bf16", "float", 16, 8, 7, float.fromhex("0x1.fep127"), 2.0 ** -133, True, "fp32", "bfloat16"),
)}
FORMAT_NAMES: tuple[str, ...] = tuple(FORMATS)


def parse_format(value: object, *, field: str = "format") -> NumberFormat:
    """The :class:`NumberFormat` named ``value``.

    Raises:
        ConfigError: one line naming the bad value and listing the known formats.
    """
    if isinstance(value, str) and value in FORMATS:
        return FORMATS[value]
    raise ConfigError(f"{field} must be one of {', '.join(FORMAT_NAMES)}, not {value!r}")


def int_format(input_bits: int) -> NumberFormat:
    """The signed integer format of ``input_bits`` (what ``"auto"`` stands for)."""
    return parse_format(f"int{input_bits}", field="input_bits format")


def datapath_bits(weight: NumberFormat, act: NumberFormat) -> int:
    """Width of one operand lane of the datapath for a buildable pair: ``max(8, widest operand)``."""
    return max(8, weight.bits, act.bits)


def build_rule(weight: NumberFormat, act: NumberFormat) -> str | None:
    """Why the generated hardware cannot build this operand pair, or ``None`` when it can (the rule
    alone: callers name the pair).

    The rule: integer operands (int4, int8, int16, any mix such as W4A8), fp8_e4m3 for both
    (the PE's exact fixed-point product, :func:`product_bits`), or bf16 or fp8_e5m2 for both (a
    float32 product and sum); a float format is never mixed with another format (nor with an
    integer one). A fixed-point format whose one exact product exceeds 64 bits would be refused.
    """
    if weight.is_int and act.is_int:
        return None
    if weight != act:
        return "not built, float operands take one format for both"
    if weight.accumulator == "fixed" and product_bits(weight) > 64:
        return f"not built, one exact product needs {product_bits(weight)} bits, beyond acc_bits <= 64"
    return None


def pe_cell(weight: NumberFormat, act: NumberFormat, pack_int4: bool) -> str:
    """The PE cell that multiplies a buildable operand pair (:func:`build_rule`): ``"int4"`` (a
    4x4-bit multiplier on the low nibbles of the 8-bit lanes) for int4 weights and activations with
    ``pack_int4`` (the int4 datapath, opted in), ``"int"`` (the integer datapath, operands
    sign-extended into its lanes) for any other integer pair, else the float format's own name. The
    RTL builds this cell (``rtl_gen.core.pe``) and the model prices it
    (``perf_model.physical.format_cost``)."""
    if pack_int4 and weight.name == "int4" and act.name == "int4":
        return "int4"
    if weight.is_int:  # an integer pair (the rule builds an integer weight with integer activations only)
        return "int"
    return weight.name


def product_bits(fmt: NumberFormat) -> int:
    """Bits of one exact signed product of two ``fmt`` operands in the accumulator's units.

    Integers: ``2 * bits``. fp8_e4m3 (fixed point, units of the smallest subnormal squared): the
    magnitude ``(max_finite / min_subnormal)**2`` plus a sign bit (37; E5M2's would be 65). A
    float32 accumulator (bf16, fp8_e5m2): 32 (the float32 pattern of the product).
    """
    if fmt.is_int:
        return 2 * fmt.bits
    if fmt.accumulator == "fp32":
        return 32
    return math.ceil(math.log2(max_product(fmt, fmt) + 1)) + 1


def max_product(weight: NumberFormat, act: NumberFormat) -> float:
    """The largest magnitude of one product in accumulator units (integers: of the lanes'
    most negative values; fp8_e4m3: of the largest finite values over the smallest subnormal). A
    float32 accumulator (bf16, fp8_e5m2) has no fixed range to overflow: 0 (the overflow check
    never fires; float32 rounds, and the data are finite values)."""
    if weight.is_int and act.is_int:
        return float(2 ** (weight.bits - 1) * 2 ** (act.bits - 1))
    if weight.accumulator == "fp32":
        return 0.0
    return (weight.max_finite / weight.min_subnormal) * (act.max_finite / act.min_subnormal)


def accumulator_rule(weight: NumberFormat, act: NumberFormat, acc_bits: int, checksum: str) -> str | None:
    """Why a buildable float pair cannot take this accumulator or checksum (``None``: it can).

    An fp8_e4m3 accumulator holds at least one exact product (:func:`product_bits`); a bf16 or
    fp8_e5m2 accumulator is a float32 pattern (``acc_bits = 32`` exactly); the checksum column sums
    integer weights, so it is built for integer operands only.
    """
    if weight.is_int and act.is_int:
        return None
    need = product_bits(weight)
    if weight.accumulator == "fp32" and acc_bits != need:
        return f"acc_bits must be {need} for {weight.name} operands (a float32 accumulator), not {acc_bits}"
    if acc_bits < need:
        return f"acc_bits must be >= {need} for {weight.name} operands (one exact product), not {acc_bits}"
    if checksum != "none":
        return f"checksum {checksum!r} is built for integer operands only, not {weight.name}"
    return None


def pair_problem(input_bits: int, weight: str, act: str, acc_bits: int | None = None,
                 checksum: str = "none") -> str:
    """Why ``input_bits`` with this weight/activation pair is no design (``""`` when it is one).

    For columns of designs (a sweep's) that did not pass through ``ArrayConfig``: an unknown
    format, a pair the RTL does not build (:func:`build_rule`), an ``input_bits`` that is not
    the pair's datapath width, or (given ``acc_bits``) an accumulator or checksum the pair
    cannot take (:func:`accumulator_rule`), each in ``ArrayConfig``'s words.
    """
    try:
        w = int_format(input_bits) if weight == AUTO else parse_format(weight, field="weight_format")
        a = int_format(input_bits) if act == AUTO else parse_format(act, field="act_format")
    except ConfigError as exc:
        return str(exc)
    rule = build_rule(w, a)
    if rule is not None:
        return f"weight_format {w.name} with act_format {a.name}: {rule}"
    width = datapath_bits(w, a)
    if width != input_bits:
        return f"input_bits must be {width} for weight_format {w.name} with act_format {a.name}, not {input_bits}"
    if acc_bits is not None:
        rule = accumulator_rule(w, a, acc_bits, checksum)
        if rule is not None:
            return f"weight_format {w.name} with act_format {a.name}: {rule}"
    return ""


def pair_input_bits(input_bits: int, weight: str, act: str) -> int:
    """The ``input_bits`` a design with this pair has: the pair's datapath width when a format is
    set (as ``ArrayConfig`` derives it), else ``input_bits``; unchanged for a pair that is no
    design (:func:`pair_problem` names why)."""
    if weight == AUTO and act == AUTO:
        return input_bits
    try:
        w = int_format(input_bits) if weight == AUTO else parse_format(weight, field="weight_format")
        a = int_format(input_bits) if act == AUTO else parse_format(act, field="act_format")
    except ConfigError:
        return input_bits
    return input_bits if build_rule(w, a) is not None else datapath_bits(w, a)


def format_tag(input_bits: object, weight: object, act: object) -> str:
    """Short name of a design's operands: ``i8`` for plain ``input_bits`` integers, else e.g. ``w4a8``.

    Takes stored values as they are (``None`` or ``"auto"``: the integer of ``input_bits``).
    """
    def tag(value: object) -> str:
        if value in (None, AUTO, f"int{input_bits}"):
            return str(input_bits)
        return str(value).removeprefix("int").removeprefix("fp8_")

    w, a = tag(weight), tag(act)
    return f"i{input_bits}" if w == a == str(input_bits) else f"w{w}a{a}"
