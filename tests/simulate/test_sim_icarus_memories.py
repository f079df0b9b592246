"""An Icarus build starts its memories at zero, as Verilator, Amaranth's simulator and the
hardware's arithmetic do (``accel_dse.simulate.runner.memory_zeroing``): a narrow conv run one tap
a word, whose weight words' rows beyond its channels are never loaded, is bit-exact in Icarus (it
read X before: X times a zero input is X); the exported Verilog keeps its memories without
contents."""

from __future__ import annotations

import re

import perf_model
from accel_dse.simulate import simulate
from accel_dse.simulate.runner.memory_zeroing import zero_memories
from accel_spec.config import ArrayConfig
from accel_spec.isa import Buffer, Opcode
from perf_model.compiler.conv import compile_conv
from perf_model.compiler.scorers import conv_path
from workloads import Workload
from workloads.ops import Conv2d

#: 4 rows on a 2-byte bus: 2 channels are one beat, 2 lanes of a 4-lane word
NARROW = ArrayConfig(rows=4, cols=4, dataflow="ws", ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1,
                     dram_bytes_per_cycle=2.0)
#: dilated along the width: not tap-packed (``perf_model.compiler.conv_pack``), so one tap a word
DILATED = Conv2d(n=1, h=5, w=5, c_in=2, c_out=4, kh=3, kw=3, pad_h=1, pad_w=2, dilation_w=2, name="dilated")


def test_a_narrow_conv_one_tap_a_word_is_bit_exact_in_icarus_in_the_walks_cycles(sim_cache):
    # the case: on chip, one tap a word, each weight LOAD fills only the first 2 of the 4 rows of a word
    assert conv_path(NARROW, DILATED)[0] == "chip"
    program = compile_conv(NARROW, DILATED, requant=False)
    weights = [c for c in program.commands if c.opcode == Opcode.LOAD and c["buffer"] == Buffer.WEIGHT]
    assert program.pack == 0 and weights
    assert all(c["words"] == 2 and c["row_step"] == NARROW.rows for c in weights)

    workload = Workload(name="w", ops=(DILATED,), counts=(1,))
    report = simulate(NARROW, workload, simulator="icarus", work_dir=sim_cache)
    (op,) = report.ops
    assert op.status == "pass", op.reason
    assert op.mismatches == 0 and op.total_cycles_match
    assert op.cycles_rtl == op.cycles_model
    assert op.cycles_total_rtl == perf_model.evaluate(NARROW, workload).ops[0].total_cycles


DECLARATIONS = """module top(clk);
  input clk;
  reg [7:0] plain [127:0];
  reg \\esc.mem  [0:3];
  reg [3:0] rom [1:0];
  initial begin
    rom[0] = 4'h1;
    rom[1] = 4'h2;
  end
  always @(posedge clk) plain[3] <= 8'h0;
endmodule
module other;
  reg [3:0] rom [1:0];
endmodule
"""


def test_every_memory_without_contents_of_its_own_is_zeroed_at_time_0():
    out = zero_memories(DECLARATIONS)
    assert "for (i = 0; i <= 127; i = i + 1) plain[i] = 0;" in out
    assert "for (i = 0; i <= 3; i = i + 1) \\esc.mem [i] = 0;" in out  # an escaped name ends at a space
    # top's rom has contents (left as they are); other's rom of the same name has none
    top, other = out.split("endmodule")[:2]
    assert "rom[i] = 0" not in top and "rom[i] = 0" in other
    # nothing else changes: without the added blocks the text is the input
    assert re.sub(r"[ \t]*initial begin : accel_dse_zero_\d+\n.*?\n.*?\n[ \t]*end\n", "", out, flags=re.S) \
        == DECLARATIONS
    assert zero_memories("module m;\n  reg [3:0] r;\nendmodule\n") == "module m;\n  reg [3:0] r;\nendmodule\n"
