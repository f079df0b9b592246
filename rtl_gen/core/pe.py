"""The processing element: one signed multiply-accumulate cell, dataflow a parameter."""

from __future__ import annotations

import dataclasses

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.config import INPUT_BITS, ArrayConfig, Dataflow
from accel_spec.errors import ConfigError
from accel_spec.number_formats import NumberFormat, parse_format, pe_cell
from accel_spec.number_formats import product_bits as format_product_bits
from rtl_gen.core.float32 import FLOAT_OPERANDS, float_product, fp32_add

__all__ = ["PE", "Fault", "pe_widths", "pe_signature", "PE_FORMATS", "FP32_FORMATS", "product_bits", "pe_format",
           "pe_cell_format", "lane_bits"]

#: Operand encodings the PE multiplies: ``"int"`` (two's complement, ``input_bits`` wide) and
#: ``"fp8_e4m3"`` (OCP E4M3FN codes in 8-bit lanes: sign, 4 exponent bits with bias 7, 3 mantissa
#: bits). An fp8 product is exact in a fixed-point accumulator with 18 fraction bits (units of
#: ``2**-18``, the square of the smallest subnormal ``2**-9``): ``workloads.formats``' semantics.
#: ``"bf16"`` (16-bit lanes of bf16 codes) and ``"fp8_e5m2"`` (8-bit lanes of OCP E5M2 codes): the
#: product and the sum are IEEE float32 (``acc_bits = 32`` holds the float32 pattern), each rounded
#: once, nearest even (``rtl_gen.core.float32``; an E5M2 product is always exact in float32). E5M2
#: has no fixed-point accumulator: one exact E5M2 product needs 65 bits, beyond ``acc_bits <= 64``.
PE_FORMATS = ("int", "int4", "fp8_e4m3", "bf16", "fp8_e5m2")
#: The formats that accumulate in float32 (the PE's, the ofmap's and the output stage's float32 path).
FP32_FORMATS = tuple(FLOAT_OPERANDS)
#: The float formats whose product is exact fixed point (their fields: ``accel_spec.number_formats``).
_FIXED_POINT = tuple(n for n in PE_FORMATS if n not in ("int", "int4") and parse_format(n).accumulator == "fixed")


def pe_format(weight: NumberFormat, act: NumberFormat) -> str:
    """The :data:`PE_FORMATS` encoding that multiplies a buildable operand pair: ``"int"`` for
    integers (any mix, sign-extended into the lanes), else the float format's own name."""
    if weight.is_int and act.is_int:
        return "int"
    if weight != act or weight.name not in PE_FORMATS:
        raise ConfigError(f"no PE multiplies weight {weight.name} with activation {act.name}: "
                          f"the PE builds {', '.join(PE_FORMATS)}")
    return weight.name


def pe_cell_format(config: ArrayConfig) -> str:
    """The PE cell a design builds: ``"int4"`` (a 4x4-bit multiplier on the low nibbles of the
    8-bit lanes) for int4 weights and activations with ``pack_int4`` (the int4 datapath, opted
    in), else :func:`pe_format`'s encoding (a W4A4 design without ``pack_int4`` keeps the 8-bit
    PE it was built with)."""
    pe_format(config.weight_fmt, config.act_fmt)  # a pair the PE multiplies, or ConfigError
    return pe_cell(config.weight_fmt, config.act_fmt, config.pack_int4)


def lane_bits(number_format: str) -> int:
    """The operand lane width a float ``number_format`` takes (bf16 16, fp8 8)."""
    return 16 if number_format == "bf16" else 8


def product_bits(number_format: str, input_bits: int) -> int:
    """Bits of one signed product: ``2 * input_bits`` for the integer datapath, else
    ``accel_spec.number_formats.product_bits`` of the format (int4 8, E4M3 37: a 36-bit magnitude, a float32
    product 32: bf16, E5M2)."""
    if number_format == "int":
        return 2 * input_bits
    return format_product_bits(parse_format(number_format))


def _fp8_integer(code: Value, e_bits: int, m_bits: int) -> tuple[Value, Value, Value]:
    """``(sign, significand, shift)`` of an fp8 code: its value is ``(-1)**sign * significand << shift``
    in units of the smallest subnormal (subnormal: ``m << 0``; normal: ``(2**m_bits + m) << (e - 1)``)."""
    exponent = code[m_bits:m_bits + e_bits]
    mantissa = code[:m_bits]
    normal = exponent != 0
    significand = Mux(normal, Cat(mantissa, Const(1, 1)), mantissa)
    shift = Mux(normal, exponent - 1, 0)[:e_bits]
    return code[m_bits + e_bits], significand, shift


def _product(m: Module, number_format: str, a: Value, b: Value, width: int) -> Value:
    """The exact product of two operands in ``number_format``, as a signed ``width``-bit value
    (bf16, E5M2: the float32 product's pattern, its logic added to ``m``)."""
    if number_format == "int":
        return a * b
    if number_format == "int4":  # the lanes' low nibbles (int4 values sign-extended into 8-bit lanes)
        return a[:4].as_signed() * b
    if number_format in FP32_FORMATS:
        return float_product(m, a, b, number_format)
    fmt = parse_format(number_format)
    e_bits, m_bits = fmt.exponent_bits, fmt.mantissa_bits
    sa, ma, ea = _fp8_integer(a, e_bits, m_bits)
    sb, mb, eb = _fp8_integer(b, e_bits, m_bits)
    magnitude = ((ma * mb) << (ea + eb))[:width - 1]
    return Mux(sa ^ sb, -magnitude, magnitude)


def _sum(m: Module, number_format: str, x: Value, y: Value, name: str = "add") -> Value:
    """``x + y`` as the accumulator adds: two's complement, or float32 (bf16, E5M2; ``-0`` only from ``-0 + -0``)."""
    return fp32_add(m, x, y, name) if number_format in FP32_FORMATS else x + y


@dataclasses.dataclass(frozen=True)
class Fault:
    """A test-only defect: bit ``bit`` of PE ``(row, col)``'s product stuck at ``stuck``.

    Used to prove that the verification checkers can fail; never part of a real design.

    Attributes:
        row: PE row, 0-based.
        col: PE column, 0-based.
        bit: product bit, ``0 <= bit < product_bits(number_format, input_bits)`` (integers
            ``2 * input_bits``; a float32 product's 32).
        stuck: the value the bit is stuck at, 0 or 1.
    """

    row: int
    col: int
    bit: int = 0
    stuck: int = 1

    def check(self, rows: int, cols: int, input_bits: int, number_format: str = "int") -> None:
        """Raise ``ConfigError`` unless the fault lies inside a ``rows x cols`` array of
        ``number_format`` PEs (:data:`PE_FORMATS`)."""
        for name, value, high in (
            ("row", self.row, rows),
            ("col", self.col, cols),
            ("bit", self.bit, product_bits(number_format, input_bits)),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < high:
                raise ConfigError(f"fault {name} must be an integer in [0, {high}), not {value!r}")
        if self.stuck not in (0, 1) or isinstance(self.stuck, bool):
            raise ConfigError(f"fault stuck must be 0 or 1, not {self.stuck!r}")

    @property
    def tag(self) -> str:
        """Short identifier used in module names, e.g. ``f1_2_b0_s1``."""
        return f"f{self.row}_{self.col}_b{self.bit}_s{self.stuck}"


def pe_widths(dataflow: Dataflow, input_bits: int, acc_bits: int) -> tuple[int, int]:
    """Widths ``(vertical, stationary)`` of a PE's two column-wise registers.

    WS/IS: the vertical path carries partial sums (``acc_bits``) and the stationary register
    holds an operand (``input_bits``). OS: the vertical path carries the B operand
    (``input_bits``) and the stationary register is the accumulator (``acc_bits``).
    """
    if dataflow is Dataflow.OS:
        return input_bits, acc_bits
    return acc_bits, input_bits


class PE(wiring.Component):
    """Signed ``input_bits x input_bits -> acc_bits`` multiply-accumulate cell.

    Registers, whatever the dataflow:

    * ``a``: the left operand, passed right one PE per cycle (``a_out``);
    * ``v``: the vertical flow, passed down one PE per cycle (``v_out``):
      WS/IS the partial sum ``v_in + a_in * weight``, OS the top operand ``v_in`` unchanged;
    * the stationary register: WS/IS the stationary operand (the weight), OS the accumulator.
    * ``f`` (OS, and every dataflow with ``shadow``): a one-bit marker passed right with ``a``
      (``f_in``/``f_out``), high with the first operand of a fold.

    Plain (``shadow=False``): the stationary register is also the column chain (``s_in`` /
    ``s_out``): when ``shift`` is high it loads ``s_in`` (the register above): WS/IS load the
    stationary operands down the column, OS drain the results out of the bottom. OS: with
    ``f_in`` the accumulator restarts at the product instead of adding to its old content, so
    a fold never depends on what the accumulators held before (power-up state, or X).

    Shadow (``shadow=True``): a second register ``w`` of the stationary width forms the column
    chain (``s_in`` / ``s_out``) and the stationary register stays inside the PE:

    * WS/IS: the product uses ``w`` while ``f_in`` is high (the first word of a fold) and the
      weight register takes ``w`` then; otherwise it uses the weight register. So the next
      fold's weights can shift into the ``w`` chain while the current fold streams.
    * OS: with ``f_in`` the finished sum moves into ``w`` and the accumulator restarts at the
      product; ``w`` then drains down the chain while the next fold accumulates.

    The chain shifts in a per-row window of the column strobe ``shift``. Each load (WS/IS) or
    drain (OS) of ``R`` steps toggles the column's phase bit ``ph`` at its first step; ``d`` is
    ``d_in`` delayed one cycle (``d_out``), and the array feeds row 0 ``d_in = ph`` and row
    ``r + 1`` row ``r``'s ``d_out``, so row ``r`` sees the phase of ``r`` (``d_in``) and ``r + 1``
    (``d``) cycles ago. At step ``j`` of a load or drain, ``d_in == ph`` exactly when ``j >= r``
    and ``d != ph`` exactly when ``j <= r``, even when loads follow back to back. WS/IS shift
    at steps ``j >= r`` (``shift & (d_in == ph)``): row ``r`` starts ``r`` steps late, so it is
    disturbed no earlier than ``r`` cycles after the load starts, which is when the swap
    wavefront passes it, and it still ends with its own word; OS at steps ``j <= r``
    (``shift & (d != ph)``): just long enough to pass the rows above it down, so its shadow is
    free for the next capture from step ``r + 1`` on. ``f_in`` has priority.

    Sums wrap modulo ``2**acc_bits`` (two's complement).

    Args:
        dataflow: ``Dataflow`` (IS uses the WS cell).
        input_bits: operand width, 8 or 16.
        acc_bits: accumulator width, ``2 * input_bits .. 64``.
        shadow: hold a shadow copy of the stationary operand (see above).
        fault: test-only stuck product bit ``(bit, stuck)`` of this cell, or ``None``.
        weight_bits: WS/IS: width of the stationary operand (default ``input_bits``); the
            checksum column (``rtl_gen.core.checksum``) holds wider row sums of the weights.
        number_format: how the operand lanes are read (:data:`PE_FORMATS`): ``"int"``, or
            ``"fp8_e4m3"`` (8-bit lanes of codes; the product an exact fixed-point number with 18
            fraction bits, ``acc_bits >= 37 + log2(K)``; NaN codes are not data), or ``"bf16"``
            (16-bit lanes of bf16 codes, ``acc_bits = 32``: a float32 product and sum, each
            rounded once to nearest even; WS partial sums add down the column in row order), or
            ``"fp8_e5m2"`` (8-bit lanes of E5M2 codes, ``acc_bits = 32``: bf16's float32 path,
            the product always exact), or ``"int4"`` (8-bit lanes holding int4 values: a 4x4-bit
            multiplier on their low nibbles; the checksum column's wider weight sums multiply
            whole; ``pe_cell_format``).
    """

    def __init__(
        self,
        *,
        dataflow: Dataflow | str = Dataflow.WS,
        input_bits: int = 8,
        acc_bits: int = 32,
        shadow: bool = False,
        fault: tuple[int, int] | None = None,
        weight_bits: int | None = None,
        number_format: str = "int",
    ) -> None:
        self.dataflow = Dataflow.parse(dataflow)
        if number_format not in PE_FORMATS:
            raise ConfigError(f"PE number_format must be one of {', '.join(PE_FORMATS)}, not {number_format!r}")
        if number_format in FP32_FORMATS and (input_bits != lane_bits(number_format) or acc_bits != 32):
            raise ConfigError(f"a {number_format} PE needs input_bits {lane_bits(number_format)} and acc_bits 32 "
                              f"(float32), not {input_bits} and {acc_bits}")
        if number_format == "int4" and input_bits != 8:
            raise ConfigError(f"an int4 PE needs input_bits 8 (int4 values in 8-bit lanes), not {input_bits}")
        if number_format in _FIXED_POINT and (input_bits != 8 or acc_bits < product_bits(number_format, 8)):
            raise ConfigError(f"a {number_format} PE needs input_bits 8 and acc_bits >= "
                              f"{product_bits(number_format, 8)}, not {input_bits} and {acc_bits}")
        self.number_format = number_format
        if input_bits not in INPUT_BITS:
            raise ConfigError(f"input_bits must be 8 or 16, not {input_bits!r}")
        if not isinstance(acc_bits, int) or not 2 * input_bits <= acc_bits <= 64:
            raise ConfigError(f"acc_bits must be an integer in [{2 * input_bits}, 64], not {acc_bits!r}")
        if not isinstance(shadow, bool):
            raise ConfigError(f"shadow must be true or false, not {shadow!r}")
        self.input_bits = input_bits
        self.acc_bits = acc_bits
        self.shadow = shadow
        self.fault = fault
        self.weight_bits = weight_bits
        super().__init__(pe_signature(self.dataflow, input_bits, acc_bits, shadow, weight_bits))
        self.registers: dict[str, Signal] = {}

    def elaborate(self, platform: object) -> Module:
        m = Module()
        ib = self.input_bits
        os_flow = self.dataflow is Dataflow.OS
        a = Signal(signed(ib))
        v = Signal.like(self.v_out)
        s = Signal.like(self.s_out, name="s")  # stationary: weight (WS/IS) or accumulator (OS)
        chain = Signal.like(self.s_out, name="w") if self.shadow else s
        m.d.comb += [self.a_out.eq(a), self.v_out.eq(v), self.s_out.eq(chain)]
        m.d.sync += a.eq(self.a_in)
        has_f = os_flow or self.shadow
        if has_f:
            f = Signal()
            m.d.comb += self.f_out.eq(f)
            m.d.sync += f.eq(self.f_in)

        if os_flow:
            other = self.v_in
        elif self.shadow:
            other = Mux(self.f_in, chain, s)
        else:
            other = s
        # integers: the operands' widths (the checksum column's weights are wider); fp8: exact fixed point
        if self.number_format == "int4":  # a weight lane's low nibble; a checksum weight sum whole
            other = other[:4].as_signed() if len(other) == ib else other
            width = 4 + len(other)
        else:
            width = ib + len(other) if self.number_format == "int" else product_bits(self.number_format, ib)
        raw = Signal(signed(width))
        product = Signal(signed(width))
        m.d.comb += [raw.eq(_product(m, self.number_format, self.a_in, other, width)), product.eq(raw)]
        if self.fault is not None:
            bit, stuck = self.fault
            m.d.comb += product[bit].eq(stuck)

        # The registers a fault-injection campaign may flip (``rtl_gen.core.checksum``).
        self.registers = {"a": a, "v": v, "s": s}
        if self.shadow:
            self.registers["w"] = chain
        # The column chain's shift enable.
        shift_now = self.shift
        if self.shadow:
            d = Signal()
            m.d.comb += self.d_out.eq(d)
            m.d.sync += d.eq(self.d_in)
            if os_flow:
                shift_now = self.shift & (d != self.ph)
            else:
                shift_now = self.shift & (self.d_in == self.ph)

        if os_flow:
            m.d.sync += v.eq(self.v_in)
            # a fold restarts at the product added to +0 (float32: so a -0 product starts at +0)
            nf = self.number_format
            restart = _sum(m, nf, Const(0, len(s)), product, "restart") if nf in FP32_FORMATS else product
            if self.shadow:
                with m.If(self.f_in):
                    m.d.sync += [chain.eq(s), s.eq(restart)]
                with m.Else():
                    m.d.sync += s.eq(_sum(m, nf, s, product))
                    with m.If(shift_now):
                        m.d.sync += chain.eq(self.s_in)
            else:
                with m.If(self.shift):
                    m.d.sync += s.eq(self.s_in)
                with m.Elif(self.f_in):
                    m.d.sync += s.eq(restart)
                with m.Else():
                    m.d.sync += s.eq(_sum(m, nf, s, product))
        else:
            m.d.sync += v.eq(_sum(m, self.number_format, self.v_in, product))
            with m.If(shift_now):
                m.d.sync += chain.eq(self.s_in)
            if self.shadow:
                with m.If(self.f_in):
                    m.d.sync += s.eq(chain)
        return m


def pe_signature(dataflow: Dataflow, input_bits: int, acc_bits: int, shadow: bool,
                 weight_bits: int | None = None) -> dict[str, object]:
    """The port members of a :class:`PE` (also used by the synthesis-only top-row variant)."""
    v_bits, s_bits = pe_widths(dataflow, input_bits, acc_bits)
    if weight_bits is not None and dataflow is not Dataflow.OS:
        s_bits = weight_bits
    members: dict[str, object] = {
        "a_in": In(signed(input_bits)),
        "a_out": Out(signed(input_bits)),
        "v_in": In(signed(v_bits)),
        "v_out": Out(signed(v_bits)),
        "s_in": In(signed(s_bits)),
        "s_out": Out(signed(s_bits)),
        "shift": In(1),
    }
    if dataflow is Dataflow.OS or shadow:
        members.update({"f_in": In(1), "f_out": Out(1)})
    if shadow:
        members.update({"ph": In(1), "d_in": In(1), "d_out": Out(1)})
    return members
