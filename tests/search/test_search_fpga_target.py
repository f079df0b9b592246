"""The sweep's FPGA target: the ``[fpga]`` table, its metrics in the evaluator, constraints on them."""

from __future__ import annotations

import json

import numpy as np
import optuna
import pytest
from search_testlib import SMALL_SPACE, make_space

import perf_model
from accel_dse.search import FpgaTarget, ModelEvaluator
from accel_dse.search.space.metrics import FPGA_METRIC_UNITS
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError
from tests.cli_testlib import assert_one_line_error

ECP5_85K = {"family": "ecp5", "device": "85k"}


def test_fpga_table_names_the_target_and_adds_the_fit_constraint():
    space = make_space(fpga=ECP5_85K, constraints=["dsp <= 156", "fmax >= 40", "bram<=208"])
    assert space.fpga == FpgaTarget(family="ecp5", device="85k")
    assert [str(c) for c in space.constraints] == ["dsps <= 156", "fmax_mhz >= 40", "brams <= 208",
                                                   "fpga_utilization <= 1"]
    assert make_space(fpga={**ECP5_85K, "fit": False}).constraints == ()
    # family defaults to ecp5
    assert make_space(fpga={"device": "um5g-45k"}).fpga == FpgaTarget(family="ecp5", device="um5g-45k")


def test_fingerprint_changes_with_the_target_only():
    plain = make_space()
    assert "fpga" not in plain.to_dict()  # studies made before the target existed keep their fingerprint
    assert make_space(fpga=ECP5_85K, constraints=[]).fingerprint != plain.fingerprint
    assert make_space(fpga=ECP5_85K).fingerprint != make_space(fpga={"device": "45k"}).fingerprint


@pytest.mark.parametrize(
    ("fpga", "constraints", "pattern"),
    [
        ({"family": "nexus", "device": "lifcl-40"}, [], r"fpga\.family: FPGA family must be one of ecp5 .*not 'nexus'"),
        ({"device": "100k"}, [], r"fpga\.device: ecp5 device must be one of 12k, 25k, 45k, 85k, .*not '100k'"),
        ({"family": "ecp5"}, [], r"fpga: 'device' is missing \(one of 12k, 25k"),
        ({"device": "85k", "speed": 2}, [], r"fpga: unknown key 'speed'"),
        ({"device": "85k", "fit": "yes"}, [], r"fpga: fit must be true or false, not 'yes'"),
        ("ecp5", [], r"fpga must be a table with family and device"),
        (None, ["luts <= 83640"], r"constraint 'luts <= 83640' bounds an FPGA metric: name the device in an \[fpga\]"),
    ],
)
def test_bad_fpga_tables(fpga, constraints, pattern):
    doc = {**SMALL_SPACE, "constraints": constraints}
    if fpga is not None:
        doc["fpga"] = fpga
    from accel_dse.search import parse_space

    with pytest.raises(ConfigError, match=pattern):
        parse_space(doc, source="test space")


def test_evaluator_adds_the_device_metrics():
    configs = [ArrayConfig(rows=r, cols=c, dataflow=df) for r, c, df in ((4, 4, "ws"), (16, 8, "os"), (64, 32, "is"))]
    columns = {f: np.array([getattr(cfg, f).value if f == "dataflow" else getattr(cfg, f) for cfg in configs])
               for f in configs[0].to_dict()}
    op = [(perf_model_op(), 1)]
    plain = ModelEvaluator([("g", 1.0, op)]).evaluate_columns(columns)
    target = ModelEvaluator([("g", 1.0, op)], fpga=FpgaTarget("ecp5", "45k")).evaluate_columns(columns)
    assert "luts" not in plain.metrics
    assert set(target.metrics) - set(plain.metrics) == set(FPGA_METRIC_UNITS)  # the metric names the search knows
    expected = perf_model.fpga_metrics(perf_model.DesignArrays.from_configs(configs), "ecp5", "45k")
    for name, values in expected.items():
        np.testing.assert_array_equal(target.metrics[name], values)
    # the 45k has 72 MULT18X18D: 64 x 32 needs 2,048 + 128
    assert target.metrics["fpga_utilization"][2] == pytest.approx((64 * 32 + 4 * 32) / 72)
    for name, values in plain.metrics.items():  # the model's own metrics are unchanged
        np.testing.assert_array_equal(target.metrics[name], values)


def perf_model_op():
    import workloads

    return workloads.resolve("gemm:m=64,k=64,n=64").ops[0]


def _space_file(tmp_path, extra: str) -> str:
    path = tmp_path / "fpga.toml"
    path.write_text(f"""
objectives = ["latency"]
{extra}
[[workloads]]
spec = "gemm:m=64,k=64,n=64"
[params]
rows = [2, 4, 8, 16]
cols = [2, 4, 8, 16]
ifmap_sram_kib = 4
weight_sram_kib = 4
ofmap_sram_kib = 8
""")
    return str(path)


def test_a_grid_sweep_keeps_only_designs_that_meet_the_device_constraints(run_cli, tmp_path):
    space = _space_file(tmp_path, 'constraints = ["dsps <= 72", "fmax_mhz >= 36"]\n[fpga]\ndevice = "85k"')
    url = f"sqlite:///{tmp_path / 'study.db'}"
    code, out, err = run_cli("sweep", "--space", space, "--sampler", "grid", "--storage", url, "--study", "s",
                             "--json")
    assert code == 0, err
    trials = optuna.load_study(study_name="s", storage=url).get_trials()
    feasible = [t for t in trials if t.user_attrs.get("feasible")]
    assert feasible
    for t in feasible:
        m = t.user_attrs["metrics"]
        # the dsps the trial records are the ones of the device's resource model: one per PE + 4 per output lane
        cfg = t.user_attrs["config"]
        assert m["dsps"] == cfg["rows"] * cfg["cols"] + 4 * cfg["cols"] <= 72
        assert m["fmax_mhz"] >= 36 and m["fpga_utilization"] <= 1
    # Without the constraints the fastest design is the 16 x 16 (320 DSPs). With them: at most 72 DSPs
    # (R C + 4 C) leaves 32 PEs (16 x 2, 8 x 4, 4 x 8), whose predicted Fmax (36.2 MHz) passes.
    best = json.loads(out)["best"][0]
    assert best["metrics"]["dsps"] <= 72
    assert best["params"]["rows"] * best["params"]["cols"] == 32


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [('[fpga]\nfamily = "gatemate"\ndevice = "ccgm1a1"', r"fpga\.family: FPGA family must be one of ecp5"),
     ('[fpga]\ndevice = "85K"', r"ecp5 device must be one of 12k, 25k, 45k, 85k, .*not '85K'"),
     ('constraints = ["dsp <= 156"]', r"bounds an FPGA metric")],
)
def test_cli_bad_target_is_one_line_exit_2(run_cli, tmp_path, monkeypatch, extra, pattern):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("sweep", "--space", _space_file(tmp_path, extra), "--trials", "2")
    assert_one_line_error(code, out, err, pattern)
    assert not (tmp_path / "runs").exists()
