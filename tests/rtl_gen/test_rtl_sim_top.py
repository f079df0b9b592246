# amaranth: UnusedElaboratable=no
"""The simulation top's reset: ``rst`` reaches the design only through one register.

Verilator re-evaluates, on every ``eval()`` call, all logic that depends combinationally on a
top-level input; the testbench calls it several times a cycle. A synchronous reset wired
straight from the port puts every register's next-state logic (the whole array) in that set.
"""

from __future__ import annotations

import re

from accel_dse.design_files import load_design
from rtl_gen import sim_name, system_verilog


def _top_body(verilog: str, top: str) -> str:
    start = verilog.index(f"module {top}(")
    return verilog[start:verilog.index("endmodule", start)]


def test_the_reset_port_feeds_only_the_reset_register() -> None:
    design = load_design("tiny")
    top = sim_name(design)
    body = _top_body(system_verilog(design, dram=(20, 64)), top)
    uses = [line.strip() for line in body.splitlines() if re.search(r"(?<![\w$.\\])rst(?![\w$])", line)]
    declarations = [u for u in uses if re.fullmatch(r"(input|wire)\s+rst;", u)]
    header = [u for u in uses if u.startswith(f"module {top}(")]
    assert len(declarations) == 2 and len(header) == 1
    rest = [u for u in uses if u not in declarations and u not in header]
    assert rest and all(re.fullmatch(r"(\w+)\s*<=\s*rst;", u) for u in rest), rest
    register = re.fullmatch(r"(\w+)\s*<=\s*rst;", rest[0]).group(1)
    assert re.search(rf"reg\s+{register}\s*=", body)  # a register, not a wire
    assert f".live_rst({register})" in body  # and it is what resets the design


def test_the_dram_model_of_the_simulation_top_has_a_file_backdoor_and_the_export_has_none() -> None:
    import pytest

    from accel_spec.errors import RtlError
    from rtl_gen.soc.sim_system import BACKDOOR, with_file_backdoor

    design = load_design("tiny")
    top = sim_name(design)
    text = system_verilog(design, dram=(20, 64))
    start = text.index(f"module \\{top}.dram ")
    dram = text[start:text.index("endmodule", start)]
    # one clocked block loads the load file into the model's word array, or dumps words lo..hi
    assert f'$readmemh("{BACKDOOR["load_file"]}", mem);' in dram
    assert f'$writememh("{BACKDOOR["dump_file"]}", mem, {BACKDOOR["lo"]}, {BACKDOOR["hi"]});' in dram
    assert text.count("$readmemh") == text.count("$writememh") == 1
    assert "$readmemh" not in system_verilog(design)  # the SoC block a user exports: no backdoor
    with pytest.raises(RtlError, match="no DRAM model array"):
        with_file_backdoor(system_verilog(design), top)
