"""The checksum option in the model: constants agree with the RTL, no cycle cost, its area and
energy only where it is built, OS infeasible with the RTL's reason, coverage from the stored
campaign."""

from __future__ import annotations

import numpy as np
import pytest

import perf_model
from accel_spec.config import CHECKSUM_DATAFLOWS, CHECKSUMS, ArrayConfig
from perf_model.physical import checksum, checksum_fit, output_check_fit, sdc_coverage_table
from perf_model.physical.output_stage import output_stage_pj
from perf_model.timing import DATAFLOW_CODES
from rtl_gen.core import checksum as rtl_checksum

GEMM = "gemm:m=40,k=70,n=50"


def test_constants_agree_with_the_rtl_and_the_config():
    assert checksum.CHECKSUMS == CHECKSUMS
    assert checksum.CHECK_LATENCY == rtl_checksum.CHECK_LATENCY
    assert checksum.CHECKSUM_DATAFLOW_CODES == tuple(DATAFLOW_CODES[f] for f in CHECKSUM_DATAFLOWS)
    # min(acc_bits, input_bits + ceil(log2 cols)), by hand; the RTL's width and the model's (arrays) alike
    cases = {(1, 8, 32): 8, (3, 8, 16): 10, (4, 8, 32): 10, (5, 8, 32): 11, (256, 8, 32): 16, (257, 8, 32): 17,
             (4096, 16, 32): 28, (7, 16, 64): 19, (4096, 8, 16): 16}
    for (cols, ib, ab), bits in cases.items():
        assert rtl_checksum.checksum_weight_bits(cols, ib, ab) == bits and checksum.weight_bits(cols, ib, ab) == bits
    cols, ib, ab = (np.array(v) for v in zip(*cases, strict=True))
    assert checksum.weight_bits(cols, ib, ab).tolist() == list(cases.values())
    with pytest.raises(Exception, match="not os"):
        rtl_checksum.check_dataflow("os")
    assert checksum.BUILD_REASON.startswith("checksum 'detect' is built for dataflows ws, is, not os")
    import rtl_gen

    assert checksum.QDATA_LATENCY == rtl_gen.QDATA_LATENCY  # the output stage check's delay line


def test_area_fit_reproduces_its_yosys_points():
    for r, c, ib, ab, area, _flops in checksum_fit.POINTS:
        model = float(checksum.array_edge_um2(r, c, ib, ab, 1))
        assert model == pytest.approx(area, rel=0.02)  # the fit within 2 % of every Yosys point
    assert float(checksum.checksum_um2(8, 8, 8, 32, 0)) == 0.0


def test_output_check_area_fit_reproduces_its_yosys_points():
    for lanes, ib, ab, area, _flops in output_check_fit.POINTS:
        model = float(checksum.output_check_um2(lanes, ib, ab, 1))
        assert model == pytest.approx(area, rel=0.005)  # within 0.5 %
    assert float(checksum.output_check_um2(8, 8, 32, 0)) == 0.0
    whole = checksum.checksum_um2(8, 8, 8, 32, 1)
    assert whole == checksum.array_edge_um2(8, 8, 8, 32, 1) + checksum.output_check_um2(8, 8, 32, 1)


def test_requantised_outputs_pay_the_output_stage_check():
    from perf_model import EnergyTable

    raw = _evaluate(dataflow="ws", checksum="detect")
    rq = _evaluate(dataflow="ws", checksum="detect", workload=GEMM + ",requant=1")
    extra = rq["energy_breakdown"]["checksum"] - raw["energy_breakdown"]["checksum"]
    energy = EnergyTable()
    ratio = float(checksum.output_check_pj(energy, 8, 32, 1) / output_stage_pj(energy, 8, 32))
    assert extra == pytest.approx(ratio * rq["energy_breakdown"]["output_stage"], rel=1e-9)  # per element, like it
    assert 0 < ratio < 1  # the stage's logic again, not its parameter read (shared, the bulk of the stage's energy)
    assert float(checksum.output_check_pj(energy, 8, 32, 0)) == 0.0


def _evaluate(workload: str = GEMM, **fields):
    import workloads

    config = ArrayConfig(rows=8, cols=8, **fields)
    result = perf_model.evaluate(config, workloads.resolve(workload))
    return {**result.total, "feasible": result.status == "ok", "reason": result.reason}


@pytest.mark.parametrize("flow", CHECKSUM_DATAFLOWS)
def test_detect_costs_area_and_energy_but_no_cycle(flow):
    plain, checked = _evaluate(dataflow=flow), _evaluate(dataflow=flow, checksum="detect")
    assert checked["feasible"] and plain["feasible"]
    assert checked["compute_cycles"] == plain["compute_cycles"] and checked["total_cycles"] == plain["total_cycles"]
    extra_um2 = (checked["area_mm2"] - plain["area_mm2"]) * 1e6 * 0.45  # cell area: the floor plan's 0.45 out
    assert extra_um2 == pytest.approx(float(checksum.checksum_um2(8, 8, 8, 32, 1)), rel=1e-9)
    assert plain["energy_breakdown"]["checksum"] == 0 < checked["energy_breakdown"]["checksum"]
    # the checksum's energy per MAC is a fraction (about 1/C) of the array's own MAC energy
    assert checked["energy_breakdown"]["checksum"] < 0.5 * checked["energy_breakdown"]["mac"]


def test_os_with_detect_is_infeasible_with_the_rtl_reason():
    total = _evaluate(dataflow="os", checksum="detect")
    assert not total["feasible"] and total["reason"] == checksum.BUILD_REASON
    assert _evaluate(dataflow="os")["feasible"]


def test_coverage_is_read_from_the_stored_campaign():
    flows = np.array([DATAFLOW_CODES[f] for f in ("ws", "ws", "is", "is", "os")])
    codes = np.array([1, 0, 1, 0, 1])
    got = checksum.sdc_coverage(flows, codes)
    for i, (flow, code) in enumerate(zip(("ws", "ws", "is", "is", "os"), codes, strict=True)):
        tallies = sdc_coverage_table.TALLIES.get((flow, CHECKSUMS[code]), {})
        corrupted = sum(tallies[p][1] for p in checksum.DATAPATH_PLACES if p in tallies)
        detected = sum(tallies[p][2] for p in checksum.DATAPATH_PLACES if p in tallies)
        assert got[i] == (detected / corrupted if corrupted else 0.0)
    assert got[1] == got[3] == got[4] == 0.0  # no checksum detects nothing; OS has no campaign
    assert got[0] >= 0.99 and got[2] >= 0.99  # the target, as the stored campaign measured it
    for flow in CHECKSUM_DATAFLOWS:
        assert sdc_coverage_table.CLEAN[(flow, "detect")][1] == 0  # no false alarm in a fault-free run
    assert _evaluate(dataflow="ws", checksum="detect")["sdc_coverage"] == pytest.approx(got[0])


def test_stored_campaign_meets_the_target_at_its_lower_bound():
    from accel_dse.sdc.campaign import lower_bound
    from accel_dse.sdc.places import PLACES

    protected = [p for p, place in PLACES.items() if place.protected]
    assert set(protected) == set(checksum.DATAPATH_PLACES)  # the metric counts what the checksum protects
    for flow in CHECKSUM_DATAFLOWS:
        tallies = sdc_coverage_table.TALLIES[(flow, "detect")]
        assert all(tallies[p][1] > 0 for p in protected)  # output stage included
        corrupted = sum(tallies[p][1] for p in protected)
        detected = sum(tallies[p][2] for p in protected)
        assert lower_bound(detected, corrupted) >= 0.99  # one-sided 95 % Clopper-Pearson
        runs, alarms = sdc_coverage_table.CLEAN[(flow, "detect")]
        assert runs >= 100 and alarms == 0
        plain = sdc_coverage_table.TALLIES[(flow, "none")]
        assert sum(plain[p][2] for p in plain) == 0 and plain.keys() == tallies.keys()
    assert lower_bound(299, 299) == pytest.approx(0.05 ** (1 / 299)) and lower_bound(299, 299) > 0.99 > lower_bound(
        298, 298)
