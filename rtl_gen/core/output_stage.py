"""The output stage: integer-only requantisation of accumulators, one channel per lane.

Per lane, with that lane's parameter word (fields of :func:`param_fields`, low bits first)::

    x = clamp(acc + bias, -2**31, 2**31 - 1)                   # int32, saturating
    y = (x * multiplier + 2**(30 + shift)) >> (31 + shift)     # arithmetic shift: floor
    q = min(max(y + zero_point, act_min), act_max)             # out_bits wide

``multiplier`` is a signed Q31 number, ``shift`` 0..31 (5 bits), so ``y`` is ``x`` times
``multiplier * 2**-(31 + shift)`` rounded half up (toward +infinity), one rounding: the
arithmetic of ``workloads.ops.Requant`` and of the JAX reference ``workloads.output_stage``.
Saturation to ``out_bits`` is ``act_min``/``act_max`` at the ends of the range; ReLU is
``act_min = zero_point``. ``act_min > act_max`` gives ``act_max`` (the order above).

Pipeline: :data:`OUTPUT_STAGE_LATENCY` register stages (``accel_spec.isa``, the timing
contract the model reads), so ``q`` is valid that many cycles after ``acc`` and ``params``; one
result per cycle, every parameter a stage still needs registered along with the data. Each
stage holds at most one carry chain (of at most 35 bits, or a 16 x 16 multiply), so its logic
depth stays below the PE's multiply-accumulate (``bench/fmax_calibration.py``; ``perf_model.physical.fmax``)::

    1  acc saturated to 34 bits (the same x whatever the bias), + bias: 35 bits
    2  x = int32 saturation; the four 16 x 16 products of the halves of x and the
       multiplier (the low halves unsigned, the high signed; a DSP block's size on an FPGA)
    3  a carry-save (3:2) step twice: the four shifted products as two 64-bit rows; the low
       32 bits of their sum (kept from bit 30) and its carry
    4  high 32 bits: prod >> 30
    5  t = prod >> (30 + shift), saturated to out_bits + 2 bits (the same q);
       z = (t + 2 * zero_point + 1) >> 1, which is y + zero_point (for k >= 1,
       floor((p + 2**(k-1)) / 2**k) == floor((floor(p / 2**(k-1)) + 1) / 2))
    6  q = act_max if z > act_max or act_min > act_max, else max(z, act_min)
"""

from __future__ import annotations

from amaranth import Cat, Const, Fragment, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.errors import ConfigError
from accel_spec.isa import OUTPUT_STAGE_LATENCY
from rtl_gen.core.bf16_output import FLOAT_OUTPUTS, build_float_lane
from rtl_gen.core.fp8_output import FP8_OUTPUTS, build_fp8_lane

__all__ = ["OutputStage", "param_fields", "param_bits", "OUTPUT_STAGE_LATENCY", "QPARAM_CHANNELS"]

#: Output channels the accelerator's parameter buffer holds per run (see ``rtl_gen.core.accelerator``).
QPARAM_CHANNELS = 4096


def param_fields(out_bits: int) -> tuple[tuple[str, int], ...]:
    """``(name, bits)`` of one lane's parameter word, from bit 0 up (all signed but ``shift``)."""
    return (("bias", 32), ("multiplier", 32), ("shift", 5), ("zero_point", out_bits), ("act_min", out_bits),
            ("act_max", out_bits))


def param_bits(out_bits: int) -> int:
    """Bits of one lane's parameter word (``69 + 3 * out_bits``)."""
    return sum(width for _, width in param_fields(out_bits))


class OutputStage(wiring.Component):
    """Requantise ``lanes`` accumulators of ``acc_bits`` to ``out_bits`` (module docstring).

    Ports: ``acc`` (``lanes * acc_bits``), ``params`` (``lanes * param_bits(out_bits)``), ``q``
    (``lanes * out_bits``); lane ``i`` at bits ``[i * w, (i + 1) * w)``, two's complement.

    Args:
        lanes: lanes (ofmap columns).
        acc_bits: accumulator bits, 2..64.
        out_bits: output bits, 2..16.
        number_format: ``"int"`` (the requantisation above) or an fp8 format of
            :data:`~rtl_gen.core.fp8_output.FP8_OUTPUTS` (``rtl_gen.core.fp8_output``: the
            fixed-point accumulator to an 8-bit code, same latency, same parameter word), or
            ``"bf16"`` (``rtl_gen.core.bf16_output``: a float32 accumulator, ``acc_bits = 32``,
            to a 16-bit bf16 code).

    Raises:
        ConfigError: a width out of range.
    """

    def __init__(self, *, lanes: int, acc_bits: int, out_bits: int, number_format: str = "int") -> None:
        for name, value, low, high in (("lanes", lanes, 1, 1 << 16), ("acc_bits", acc_bits, 2, 64),
                                       ("out_bits", out_bits, 2, 16)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(f"output stage {name} must be an integer in [{low}, {high}], not {value!r}")
        widths = {**{name: (8, None) for name in FP8_OUTPUTS}, "bf16": (16, 32), "fp8_e5m2": (8, 32)}
        if number_format != "int" and (number_format not in widths or out_bits != widths[number_format][0]
                                       or widths[number_format][1] not in (None, acc_bits)):
            raise ConfigError(f"output stage number_format must be int, {', '.join(FP8_OUTPUTS)} (8-bit codes), "
                              f"bf16 (16-bit codes) or fp8_e5m2 (8-bit codes) of a 32-bit float32 accumulator, "
                              f"not {number_format!r} with out_bits {out_bits} and acc_bits {acc_bits}")
        self.lanes = lanes
        self.acc_bits = acc_bits
        self.out_bits = out_bits
        self.number_format = number_format
        super().__init__({
            "acc": In(lanes * acc_bits),
            "params": In(lanes * param_bits(out_bits)),
            "q": Out(lanes * out_bits),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        self._register_bits = 0
        ab, ob, pb = self.acc_bits, self.out_bits, param_bits(self.out_bits)
        for lane in range(self.lanes):
            word = self.params[lane * pb:(lane + 1) * pb]
            field = {}
            at = 0
            for name, width in param_fields(ob):
                field[name] = word[at:at + width]
                at += width
            pipe = _Lane(m, lane)
            acc, q = self.acc[lane * ab:(lane + 1) * ab].as_signed(), self.q[lane * ob:(lane + 1) * ob]
            if self.number_format == "int":
                pipe.build(acc, field, q)
            elif self.number_format in FLOAT_OUTPUTS:
                build_float_lane(pipe, acc, field, q, self.number_format)
            else:
                build_fp8_lane(pipe, acc, field, q, self.number_format)
            self._register_bits += pipe.bits
            self._stages = pipe.stage
        return m

    def register_bits(self) -> int:
        """Flip-flop bits of all lanes as elaborated (before synthesis drops constant ones)."""
        self._register_bits = 0
        Fragment.get(self, None)
        return self._register_bits

    def stages(self) -> int:
        """Register stages from ``acc`` to ``q`` as elaborated (:data:`OUTPUT_STAGE_LATENCY`)."""
        Fragment.get(self, None)
        return self._stages


def _saturate(value: Value, bits: int) -> Value:
    """``value`` clamped to ``bits``-bit two's complement: it fits iff its bits from ``bits - 1`` up agree."""
    if len(value) <= bits:
        return value
    top = value[bits - 1:]
    fits = (top == 0) | (top == (1 << len(top)) - 1)
    return Mux(fits, value[:bits].as_signed(), Mux(value[-1], Const(-(1 << (bits - 1)), signed(bits)),
                                                   Const((1 << (bits - 1)) - 1, signed(bits))))


class _Lane:
    """One lane's pipeline (module docstring); registers named ``<what><lane>_s<stage>``."""

    def __init__(self, m: Module, lane: int) -> None:
        self.m = m
        self.lane = lane
        self.stage = 0
        self.bits = 0

    def step(self, values: dict[str, Value]) -> dict[str, Signal]:
        """Register ``values`` into the next stage."""
        self.stage += 1
        regs = {}
        for name, value in values.items():
            regs[name] = Signal(value.shape(), name=f"{name}{self.lane}_s{self.stage}")
            self.m.d.sync += regs[name].eq(value)
            self.bits += len(regs[name])
        return regs

    def wire(self, name: str, value: Value, bits: int | None = None) -> Signal:
        """``value`` as a named combinational signal (shared by its uses, not copied into each),
        of ``bits`` bits (extended by its signedness, or truncated) if given."""
        sig = Signal(value.shape() if bits is None else bits, name=f"{name}{self.lane}")
        self.m.d.comb += sig.eq(value)
        return sig

    def add(self, a: Value, b: Value, width: int, keep_from: int, held: dict[str, Value], stages: int
            ) -> tuple[Value, dict[str, Signal]]:
        """``(a + b) mod 2**width`` from bit ``keep_from`` up, its carry chain split over ``stages`` stages.

        Returns the sum (unsigned, ``width - keep_from`` bits) and ``held`` registered alongside.
        """
        a, b = a.as_signed(), b.as_signed()
        ops = {"a": Cat(a, a[-1].replicate(width - len(a)))[:width],
               "b": Cat(b, b[-1].replicate(width - len(b)))[:width]}
        done: list[Value] = []
        carry: Value = Const(0, 1)
        chunk = -(-width // stages)
        for low in range(0, width, chunk):
            high = min(low + chunk, width)
            n = high - low
            part = ops["a"][:n] + ops["b"][:n] + carry
            kept = part[max(keep_from - low, 0):n]
            rest = {"carry": part[n], "a": ops["a"][n:], "b": ops["b"][n:]} if high < width else {}
            regs = self.step({**{f"sum{i}_": v for i, v in enumerate(done)}, **({"part": kept} if len(kept) else {}),
                              **rest, **held})
            done = [regs[f"sum{i}_"] for i in range(len(done))] + ([regs["part"]] if len(kept) else [])
            if rest:
                carry, ops = regs["carry"], {"a": regs["a"], "b": regs["b"]}
            held = {k: regs[k] for k in held}
        return Cat(*done), held

    def build(self, acc: Value, field: dict[str, Value], q: Value) -> None:
        """Stages 1 to 6 of the module docstring from ``acc`` and the parameter ``field`` s to ``q``."""
        ob = len(q)
        held: dict[str, Value] = {"mult": field["multiplier"].as_signed(), "shift": field["shift"],
                                  "zp": field["zero_point"].as_signed(), "lo": field["act_min"].as_signed(),
                                  "hi": field["act_max"].as_signed()}
        # stage 1: acc + bias
        total, held = self.add(_saturate(acc, 34), field["bias"], 35, 0, held, stages=1)
        x = _saturate(total.as_signed(), 32)
        # stage 2: saturation and the four 16 x 16 products of the halves of x and the multiplier
        x = self.wire("x", x)
        mult = held["mult"]
        halves = {"x": (x[:16], x[16:].as_signed()), "m": (mult[:16], mult[16:].as_signed())}
        parts = {f"p{i}{j}": halves["x"][i] * halves["m"][j] for i in (0, 1) for j in (0, 1)}
        regs = self.step({**parts, **{k: v for k, v in held.items() if k != "mult"}})
        held = {k: regs[k] for k in ("shift", "zp", "lo", "hi")}
        # stages 3-4: their sum (a 4:2 carry-save step, then two 32-bit halves), prod >> 30 (34 bits)
        rows: list[Value] = [self.wire(f"row{k}_", regs[k] << (16 * (int(k[1]) + int(k[2]))), 64)
                             for k in ("p00", "p01", "p10", "p11")]
        while len(rows) > 2:
            a, b, c, *rest = rows
            rows = [*rest, self.wire(f"csa{len(rest)}s", a ^ b ^ c),
                    self.wire(f"csa{len(rest)}c", (((a & b) | (a & c) | (b & c)) << 1)[:64])]
        prod30, held = self.add(rows[0], rows[1], 64, 30, held, stages=2)
        # stage 5: the shift, saturation and the rounding add with the zero point
        t = _saturate(prod30.as_signed() >> held["shift"], ob + 2)
        regs = self.step({"z": (t + Cat(Const(1, 1), held["zp"]).as_signed()) >> 1, "lo": held["lo"],
                          "hi": held["hi"]})
        # stage 6: the clamp
        z, lo, hi = regs["z"], regs["lo"], regs["hi"]
        self.m.d.sync += q.eq(Mux((z > hi) | (lo > hi), hi, Mux(z < lo, lo, z)))
        self.stage += 1
        self.bits += ob
