"""simulate of a ``checksum = "detect"`` design (Icarus): the testbench sets ``SDC_CTRL.STOP``, so a
false alarm would stop the program with ERROR_CODE 8 and fail the op. A conv built from NHWC windows
(pads made on chip) and a GEMM pass bit-exact in the model's cycles; a stuck PE product bit is
stopped by the checksum (error 8), not only found by the comparison with JAX; each op reports
SDC_COUNT and SDC_PC."""

from __future__ import annotations

import dataclasses

import rtl_gen
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate

CHECKED = dataclasses.replace(load_design("tiny"), checksum="detect")  # 4x4 WS
HEADER = "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"


def test_a_checksum_design_runs_a_padded_conv_and_a_gemm_without_a_false_alarm(sim_cache, tmp_path):
    csv = tmp_path / "conv.csv"
    csv.write_text(HEADER + "k3, 8, 8, 3, 3, 4, 8, 1,\n")  # SAME padding: pad words are made on chip
    for spec in (str(csv), "gemm:m=24,k=20,n=12,requant=1"):
        report = simulate(CHECKED, spec, simulator="icarus", work_dir=sim_cache)
        for op in report.ops:
            assert op.status == "pass", op.reason
            assert op.mismatches == 0 and op.total_cycles_match and op.cycles_rtl == op.cycles_model
            assert (op.to_dict()["sdc_count"], op.to_dict()["sdc_pc"]) == (0, 0)  # reported, no false alarm


def test_a_stuck_pe_bit_stops_a_checksum_design_with_the_sdc_error(sim_cache):
    report = simulate(CHECKED, "gemm:m=24,k=20,n=12", simulator="icarus", work_dir=sim_cache,
                      fault=rtl_gen.Fault(1, 2, 3, 1))
    (op,) = report.ops
    assert op.status != "pass"
    assert "error 8" in op.reason, op.reason  # ERROR_CODE 8 (SDC): the checksum stopped it
    # simulate reports SDC_COUNT and SDC_PC: the mismatch was counted, at the command that stopped
    assert op.to_dict()["sdc_count"] >= 1 and f"at command {op.sdc_pc}" in op.reason, (op.sdc_count, op.reason)
    assert report.to_dict()["ops"][0]["sdc_pc"] == op.sdc_pc
