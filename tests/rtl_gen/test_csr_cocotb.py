# amaranth: UnusedElaboratable=no
"""The exported control-register Verilog under Icarus, driven by cocotbext-axi's AxiLiteMaster
(``csr_cocotb_tb.py``): the port names are the ones ``AxiLiteBus.from_prefix(dut, "s_axil")`` finds."""

from __future__ import annotations

import json
from pathlib import Path

from amaranth.back import verilog

from accel_dse.simulate import build_design, find_simulator, run_testbench
from accel_spec.config import Dataflow
from rtl_gen import ControlRegisters

HERE = Path(__file__).resolve().parent


def test_cocotbext_axi_master_drives_the_exported_verilog(tmp_path):
    dut = ControlRegisters(rows=16, cols=8, dataflow=Dataflow.WS, axi_data_bytes=8, ifmap_depth=256,
                           weight_depth=256, ofmap_depth=256, queue_depth=128)
    text = verilog.convert(dut, name="accel_csr", emit_src=False, strip_internal_attrs=True)
    build = build_design(text, top="accel_csr", simulator=find_simulator("icarus"), work_dir=tmp_path)
    out = tmp_path / "seen.json"
    outcome = run_testbench(build, test_module="csr_cocotb_tb", run_dir=tmp_path / "run", timeout=120,
                            python_path=[str(HERE)], env={"CSR_OUT": str(out)})
    assert outcome.ok, (tmp_path / "run" / "sim.log").read_text()[-2000:]
    seen = json.loads(out.read_text())
    assert seen == {
        "id": 0xACCE1D5E, "rows": 16,
        "queue_len": 0x1122AB44, "queue_len_port": 0x1122AB44,
        "unmapped_read_resp": 2, "unmapped_write_resp": 2,
        "cycles_total": 0x0000_0005_FFFF_FFFE,
        "irq_after_done": 1, "status": 0b010, "irq_after_w1c": 0,
    }
