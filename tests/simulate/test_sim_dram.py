"""simulate from DRAM: the SoC block in Icarus/Verilator runs whole ops through AXI, bit-exact
against JAX, with the RTL's total-cycle counter equal to the model's total for the same program.

Expected data come from JAX (``workloads.reference``), expected totals from
``perf_model.program_timing`` (held to the RTL cycle by cycle in tests/rtl_gen/test_rtl_system.py
on the Amaranth simulator); here the same contract must hold on the generated Verilog.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from accel_dse.design_files import load_design
from accel_dse.simulate import simulate

TINY = load_design("tiny")  # 4x4 WS, ifmap/weight 4 KiB, ofmap 8 KiB, 4-byte AXI


def _tiny(df: str, double: bool, **kw):
    return dataclasses.replace(TINY, dataflow=df, double_buffered=double, **kw)


@pytest.mark.parametrize("double", [True, False])
@pytest.mark.parametrize("df", ["ws", "os", "is"])
def test_a_multi_tile_gemm_from_dram_is_exact_in_data_and_total_cycles(df, double, sim_cache):
    # 64 x 72 x 12 int8 on 4 KiB operand buffers: A alone is 4.5 KiB, so the op runs as several tiles
    # (N = 12 is three column folds of the 4 x 4 array)
    report = simulate(_tiny(df, double), "gemm:m=64,k=72,n=12", simulator="icarus", work_dir=sim_cache)
    (op,) = report.ops
    assert op.status == "pass", op.reason
    assert op.tiles > 1 and op.mismatches == 0
    assert op.cycles_rtl == op.cycles_model
    assert op.total_cycles_match and op.cycles_total_rtl == op.cycles_total_model
    assert op.cycles_total_rtl > op.cycles_rtl  # DMA stalls, fetch, fill and drain are counted
    assert op.stall_cycles_rtl == op.stall_cycles_model == op.cycles_total_rtl - op.cycles_rtl


def test_double_buffering_and_a_wider_bus_are_faster_in_rtl_as_the_model_says(sim_cache):
    totals = {}
    # two runs (N = 8 is two column folds of the 4 x 4 array): double buffering has the second run's loads to hide
    for double, bw in ((False, 4.0), (True, 4.0), (True, 1.0)):
        report = simulate(_tiny("ws", double, dram_bytes_per_cycle=bw), "gemm:m=48,k=48,n=8,requant=1",
                          simulator="icarus", work_dir=sim_cache)
        (op,) = report.ops
        assert op.status == "pass" and op.total_cycles_match, op.reason
        totals[(double, bw)] = op.cycles_total_rtl
    assert totals[(True, 4.0)] < totals[(False, 4.0)]
    assert totals[(True, 4.0)] < totals[(True, 1.0)]


def test_a_memory_slower_than_the_bus_is_paced_in_rtl_exactly_as_the_walk(sim_cache):
    # 3 B/cycle asks a 4-byte bus: the DRAM model moves a beat only on 4 bytes of credit.
    totals = {}
    for bw in (4.0, 3.0):
        report = simulate(_tiny("ws", True, dram_bytes_per_cycle=bw), "gemm:m=16,k=24,n=8,requant=1",
                          simulator="icarus", work_dir=sim_cache)
        (op,) = report.ops
        assert op.status == "pass" and op.total_cycles_match, op.reason
        assert any("paced to 3 bytes per cycle" in note for note in report.notes) == (bw == 3.0), report.notes
        totals[bw] = op.cycles_total_rtl
    assert totals[3.0] > totals[4.0]


def test_the_json_report_carries_the_total_cycle_fields(run_cli, sim_cache):
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", "gemm:m=16,k=24,n=12", "--simulator",
                             "icarus", "--json", "--work-dir", str(sim_cache))
    assert code == 0, err
    report = json.loads(out)
    (op,) = report["ops"]
    for key in ("cycles_total_rtl", "cycles_total_model", "stall_cycles_rtl", "stall_cycles_model"):
        assert isinstance(op[key], int), key
    assert op["total_cycles_match"] is True and report["totals"]["total_cycles_match"] is True
    assert report["design"]["memory"] == "dram" and report["design"]["top"].startswith("accel_sim_")


def test_a_fault_injected_design_fails_from_dram_too(run_cli, sim_cache):
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", "gemm:m=8,k=8,n=8", "--simulator",
                             "icarus", "--inject-fault", "1,2,0,1", "--json", "--work-dir", str(sim_cache))
    assert code == 1, err
    (op,) = json.loads(out)["ops"]
    assert op["status"] == "fail" and op["mismatches"]["count"] > 0
    first = op["mismatches"]["first"]
    assert first and all(entry["index"][2] % 4 == 2 for entry in first)  # WS: PE column 2's outputs


def test_the_dram_image_is_written_and_c_read_without_a_clock_per_word(sim_cache):
    # A (64 x 72) and B (72 x 12) int8 and C (64 x 12 x 4 bytes) are over 2,000 4-byte words; the
    # backdoor writes and reads them in zero simulated time, so the clock cycles the testbench
    # simulates beyond the accelerator's own are only its register accesses (a few per register)
    report = simulate(_tiny("ws", True), "gemm:m=64,k=72,n=12", simulator="icarus", work_dir=sim_cache)
    (op,) = report.ops
    assert op.status == "pass", op.reason
    assert 0 < op.sim_cycles - op.cycles_total_rtl < 300


def test_a_verilator_build_holds_every_op_of_a_network_so_other_gemms_reuse_it():
    from accel_dse.simulate.dram.driver import DRAM_MIN_BYTES, dram_words
    from accel_dse.simulate.dram.job_files import DramProgram

    def program(nbytes: int) -> DramProgram:
        return DramProgram({"data_bytes": 16}, {"img_0_0": np.zeros(nbytes, np.uint8)})

    small, mid = program(1000), program(3 << 20)
    # the DRAM size is in the Verilog, so in the build's key: Verilator gets one size for both
    assert dram_words(small, "verilator") == dram_words(mid, "verilator") == DRAM_MIN_BYTES["verilator"] // 16
    assert dram_words(program(DRAM_MIN_BYTES["verilator"] + 1), "verilator") == 2 * DRAM_MIN_BYTES["verilator"] // 16
    assert dram_words(small, "icarus") == (1 << 16) // 16  # Icarus: what the images need
    assert dram_words(mid, "icarus") == (4 << 20) // 16
