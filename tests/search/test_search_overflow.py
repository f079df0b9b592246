"""A design whose accumulators can overflow on a workload fails its trial with status overflow; the sweep goes on."""

from __future__ import annotations

import json

import optuna

from accel_dse.search import ModelEvaluator
from accel_spec.config import ArrayConfig
from workloads.ops import Gemm, Workload

WL = Workload(name="deep", ops=(Gemm(m=64, k=4608, n=64, name="conv"),))

SPACE = """name = "acc"
objectives = ["edp"]
workloads = ["gemm:m=64,k=4608,n=64"]
[params]
rows = { low = 4, high = 32, scale = "pow2" }
cols = { low = 4, high = 32, scale = "pow2" }
acc_bits = [16, 24, 32]
weight_sram_kib = 256
ifmap_sram_kib = 256
"""


def test_model_evaluator_marks_overflow():
    ev = ModelEvaluator([("deep", 1.0, WL)])
    bad = ev.evaluate(ArrayConfig(rows=8, cols=8, acc_bits=24, weight_sram_kib=256))
    good = ev.evaluate(ArrayConfig(rows=8, cols=8, acc_bits=32, weight_sram_kib=256))
    assert not bad.feasible and bad.overflow and "acc_bits = 24" in bad.reason and "K = 4608" in bad.reason
    assert good.feasible and not good.overflow and good.metrics["edp"] > 0
    assert bad.metrics["edp"] == 0


def test_sweep_records_overflow_trials_and_goes_on(run_cli, tmp_path):
    space = tmp_path / "acc.toml"
    space.write_text(SPACE)
    code, out, err = run_cli("sweep", "--json", "--quiet", "--space", str(space), "--trials", "24", "--sampler",
                             "random", "--seed", "4", "--out-dir", str(tmp_path / "run"))
    assert code == 0, err
    summary = json.loads(out)
    assert summary["n_complete"] + summary["n_fail"] == 24
    study = optuna.load_study(study_name="acc", storage=f"sqlite:///{tmp_path / 'run' / 'study.db'}")
    statuses = {}
    for trial in study.trials:
        acc = trial.user_attrs["config"]["acc_bits"]
        statuses.setdefault(acc, set()).add(trial.user_attrs["status"])
        if trial.user_attrs["status"] == "overflow":
            assert trial.state == optuna.trial.TrialState.FAIL and "accumulator overflow" in trial.user_attrs["reason"]
    # 4608 * 2^14 = 75,497,472 needs 28 bits: 16 and 24 always overflow, 32 never
    assert statuses[16] == statuses[24] == {"overflow"} and statuses[32] == {"ok"}
    assert summary["best"] and all(b["design"]["acc_bits"] == 32 for b in summary["best"])
