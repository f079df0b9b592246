"""Which accumulator for fp8_e5m2: float32 (bf16's path) or an exact wide fixed-point sum? Yosys decides.

An E5M2 value is ``n * 2**-16`` with ``|n| <= 57344 * 2**16 = 1.75 * 2**31``, so one exact product
is an integer in units of ``2**-32`` of up to 64 bits (65 with the sign), and an exact sum of
``K`` of them needs ``65 + ceil(log2 K)`` bits (77 for K = 4096). This bench synthesises the
multiply-accumulate core of a WS PE both ways (the partial sum in, the product added, the sum
registered; the operand registers left out, they are the same 8 bits both ways):

* ``float32``: ``rtl_gen.core.float32.float_product`` (exact for E5M2) + ``fp32_add``, a 32-bit sum;
* ``fixed K``: the exact fixed-point product (``rtl_gen.core.pe``'s fp8 decoding) sign-extended
  and added in ``65 + log2 K`` bits;

and prints area (NanGate FreePDK45 X1, µm^2) and logic depth (FO4), with the E4M3 fixed-point core
(37 + log2 K bits) beside them. The accumulator width also sets every ofmap lane (SRAM bits per
output, the fold adder, the output stage's input), so the printed ``acc bits`` scale those too.

Usage: ``.venv/bin/python bench/e5m2_accumulator.py``  (Yosys: a few minutes)
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for path in (REPO, REPO / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from amaranth import Module, Mux, Signal, signed  # noqa: E402
from amaranth.back import verilog  # noqa: E402
from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402
from area_calibration import yosys_gates  # noqa: E402
from fmax_calibration import logic_depth  # noqa: E402

from rtl_gen.core.float32 import float_product, fp32_add  # noqa: E402
from rtl_gen.core.pe import _fp8_integer  # noqa: E402


class MacCore(wiring.Component):
    """``v = v_in + a * b`` registered: ``kind`` ``"float32"`` or ``"fixed"`` (``width`` bits, fp8
    ``e_bits``/``m_bits``)."""

    def __init__(self, kind: str, width: int, e_bits: int = 5, m_bits: int = 2) -> None:
        self.kind, self.width, self.e_bits, self.m_bits = kind, width, e_bits, m_bits
        super().__init__({"a": In(8), "b": In(8), "v_in": In(signed(width)), "v": Out(signed(width))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        if self.kind == "float32":
            total = fp32_add(m, self.v_in, float_product(m, self.a, self.b, "fp8_e5m2"))
        else:
            sa, ma, ea = _fp8_integer(self.a, self.e_bits, self.m_bits)
            sb, mb, eb = _fp8_integer(self.b, self.e_bits, self.m_bits)
            magnitude = (ma * mb) << (ea + eb)
            product = Signal(signed(self.width))
            m.d.comb += product.eq(Mux(sa ^ sb, -magnitude, magnitude))
            total = self.v_in + product
        v = Signal(signed(self.width))
        m.d.sync += v.eq(total)
        m.d.comb += self.v.eq(v)
        return m


def measure(name: str, core: MacCore) -> dict[str, float]:
    text = verilog.convert(core, name=name, emit_src=False, strip_internal_attrs=True)
    gates = yosys_gates(name, text)
    return {"area": gates["area_um2"], "fo4": logic_depth(name, text)["fo4"]}


def main() -> int:
    cases = [("e5m2_float32", MacCore("float32", 32), 32)]
    for k in (256, 4096):
        w = 65 + math.ceil(math.log2(k))
        cases.append((f"e5m2_fixed_k{k}", MacCore("fixed", w), w))
    cases.append(("e4m3_fixed_k4096", MacCore("fixed", 37 + 12, 4, 3), 49))
    print("core               acc bits  area um2   FO4")
    for name, core, bits in cases:
        try:
            p = measure(name, core)
        except (subprocess.SubprocessError, RuntimeError) as exc:
            print(f"{name}: synthesis failed: {exc}")
            return 1
        print(f"{name:<18} {bits:>8} {p['area']:>9.1f} {p['fo4']:>5.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
