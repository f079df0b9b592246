# amaranth: UnusedElaboratable=no
"""How one per-lane buffer bank of the accelerator maps onto ECP5 memory (Yosys ``synth_ecp5``).

Each bank in ``rtl_gen.core.accelerator`` is an Amaranth ``Memory`` of ``depth`` words of one lane
(8-bit operands, 32-bit ofmap partial sums) with one write port and one synchronous read
port with enable. This synthesises exactly that shape alone for a grid of depths and prints
the cells Yosys maps it to (DP16KD block RAM, TRELLIS_DPR16X4 LUT RAM, flip-flops) and the
share of the block RAM's 18 Kbit the bank fills. Synthesis only (no place and route), ~3 s a row.

    python bench/fpga_bram_mapping.py [--depths 16,64,256,512,1024,2048,8192] [--widths 8,32]
"""

from __future__ import annotations

import argparse

from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from rtl_gen.tools.fpga import fpga_cells

EBR_BITS = 18 * 1024


class Bank(wiring.Component):
    """One lane's bank, ported like the accelerator's (write port + enabled sync read port)."""

    def __init__(self, depth: int, width: int) -> None:
        self.depth, self.width = depth, width
        abits = max(1, (depth - 1).bit_length())
        super().__init__({"waddr": In(abits), "wdata": In(width), "we": In(1),
                          "raddr": In(abits), "re": In(1), "rdata": Out(width)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self.width, depth=self.depth, init=[])
        wp, rp = mem.write_port(), mem.read_port()
        m.d.comb += [wp.addr.eq(self.waddr), wp.data.eq(self.wdata), wp.en.eq(self.we),
                     rp.addr.eq(self.raddr), rp.en.eq(self.re), self.rdata.eq(rp.data)]
        unused = Signal()
        m.d.sync += unused.eq(0)  # a clock domain for the synchronous read port
        return m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="16,64,256,512,1024,2048,8192")
    parser.add_argument("--widths", default="8,32")
    args = parser.parse_args()
    print(f"{'width':>5} {'depth':>6} {'KiB':>6} {'DP16KD':>6} {'LUTRAM':>6} {'FF':>5} {'LUT4':>5}  EBR fill")
    for width in (int(w) for w in args.widths.split(",")):
        for depth in (int(d) for d in args.depths.split(",")):
            text = verilog.convert(Bank(depth, width), name="bank", emit_src=False, strip_internal_attrs=True)
            cells = fpga_cells(text, "bank", family="ecp5")
            ebr = cells.get("DP16KD", 0)
            fill = f"{100 * depth * width / (ebr * EBR_BITS):.0f} %" if ebr else "-"
            print(f"{width:>5} {depth:>6} {depth * width / 8192:>6.3g} {ebr:>6} {cells.get('TRELLIS_DPR16X4', 0):>6} "
                  f"{cells.get('TRELLIS_FF', 0):>5} {cells.get('LUT4', 0):>5}  {fill}")


if __name__ == "__main__":
    main()
