"""``checksum`` in a space: a grid sweep trades it against area and EDP under an ``sdc_coverage``
constraint, and the report shows the coverage beside the cost."""

from __future__ import annotations

import json

import optuna

SPACE = """
objectives = ["edp", "area"]
{constraint}
[[workloads]]
spec = "gemm:m=64,k=64,n=64"
[params]
rows = [4, 8]
cols = [4, 8]
dataflow = ["ws", "os"]
checksum = ["none", "detect"]
ifmap_sram_kib = 8
weight_sram_kib = 8
ofmap_sram_kib = 16
"""


def _sweep(run_cli, tmp_path, constraint: str):
    path = tmp_path / f"ck{len(constraint)}.toml"
    path.write_text(SPACE.format(constraint=constraint))
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = f"s{len(constraint)}"
    code, out, err = run_cli("sweep", "--space", str(path), "--sampler", "grid", "--storage", url, "--study", study,
                             "--json", "--quiet")
    assert code == 0, err
    return json.loads(out), optuna.load_study(study_name=study, storage=url).get_trials()


def test_checksum_trades_against_area_and_edp_under_a_coverage_constraint(run_cli, tmp_path):
    summary, trials = _sweep(run_cli, tmp_path, "")
    by_design = {}
    for t in trials:
        cfg = t.user_attrs["config"]
        by_design[(cfg["rows"], cfg["cols"], cfg["dataflow"], cfg["checksum"])] = t.user_attrs
    for (r, c, flow, ck), attrs in by_design.items():
        if flow == "os" and ck == "detect":  # refused, with the reason the RTL gives
            assert attrs["status"] == "infeasible" and "not os" in attrs["reason"]
        elif ck == "detect":
            plain = by_design[(r, c, flow, "none")]["metrics"]
            m = attrs["metrics"]
            assert m["area_mm2"] > plain["area_mm2"] and m["edp"] > plain["edp"]  # the cost ...
            assert m["sdc_coverage"] >= 0.99 > plain["sdc_coverage"] == 0  # ... and what it buys
    # without a constraint the cheaper unprotected designs win
    assert summary["best"] and all(b["design"]["checksum"] == "none" for b in summary["best"])
    guarded, _ = _sweep(run_cli, tmp_path, 'constraints = ["sdc_coverage >= 0.9"]')
    assert guarded["best"] and all(b["design"]["checksum"] == "detect" and b["design"]["dataflow"] == "ws"
                                   for b in guarded["best"])
