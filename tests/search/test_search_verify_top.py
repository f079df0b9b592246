"""``accel-dse sweep --verify-top K``: the best designs of the finished sweep checked in RTL (Icarus)."""

from __future__ import annotations

import json

import optuna
import pytest
from optuna.trial import TrialState

TINY_SPACE = """name = "tiny"
objectives = ["edp"]
workloads = ["gemm:m=8,k=12,n=8"]
[params]
rows = [2, 4]
cols = [2, 4]
dataflow = ["ws", "os", "is"]
ifmap_sram_kib = 1
weight_sram_kib = 1
ofmap_sram_kib = 1
dram_bytes_per_cycle = [2.0, 8.0]
"""


@pytest.fixture
def tiny(tmp_path):
    space = tmp_path / "tiny.toml"
    space.write_text(TINY_SPACE)
    return space


def _args(tmp_path, space, *extra):
    return ["sweep", "--space", str(space), "--sampler", "random", "--trials", "10", "--seed", "4", "--quiet",
            "--out-dir", str(tmp_path / "run"), "--verify-simulator", "icarus", "--verify-scale", "1",
            "--verify-work-dir", str(tmp_path / "sim"), *extra]


def _best_two(url):
    """The two best distinct feasible designs of the study, read back from the storage."""
    study = optuna.load_study(study_name="tiny", storage=url)
    best, seen = [], set()
    for t in sorted(study.get_trials(states=(TrialState.COMPLETE,)), key=lambda t: (t.value, t.number)):
        if t.user_attrs["config_hash"] not in seen:
            seen.add(t.user_attrs["config_hash"])
            best.append(t)
    return study, best[:2]


def test_verify_top_2_records_rtl_results(run_cli, tmp_path, tiny):
    code, out, err = run_cli(*_args(tmp_path, tiny, "--verify-top", "2", "--json"))
    assert code == 0, err
    summary = json.loads(out)
    url = f"sqlite:///{tmp_path / 'run' / 'study.db'}"
    study, best = _best_two(url)
    verification = summary["verification"]
    assert [v["trial"] for v in verification] == [t.number for t in best]  # ranking order
    for v, t in zip(verification, best, strict=True):
        assert v["passed"] is True and v["status"] == "pass" and v["simulator"] == "icarus" and v["scale"] == 1.0
        assert v["config_hash"] == t.user_attrs["config_hash"]
        assert v["ops"] == v["ops_passed"] == 1 and v["mismatches"] == 0
        assert v["cycles_rtl"] == v["cycles_model"] and v["cycles_rtl"] > 0
        assert v["synth"]["cells"] > 0
        stored = study.user_attrs[f"accel_dse.verify.{t.number}"]  # recorded in the study
        assert stored["passed"] is True and stored["cycles_rtl"] == v["cycles_rtl"]
    assert "verify: [2/2]" in err  # progress on stderr, stdout stays JSON


def test_a_design_failing_rtl_verification_fails_the_sweep_loudly(run_cli, tmp_path, tiny, monkeypatch):
    import accel_dse.simulate
    import rtl_gen

    real = accel_dse.simulate.simulate

    def stuck_bit(design, workload, **kwargs):
        return real(design, workload, fault=rtl_gen.Fault(row=0, col=0, bit=2, stuck=1), **kwargs)

    monkeypatch.setattr(accel_dse.simulate, "simulate", stuck_bit)
    code, out, err = run_cli(*_args(tmp_path, tiny, "--verify-top", "1"))
    assert code == 1, err
    _, best = _best_two(f"sqlite:///{tmp_path / 'run' / 'study.db'}")
    assert f"RTL VERIFICATION FAILED: trial {best[0].number} (" in out
    assert "RTL verification: 0/1 designs passed" in out
    assert "best designs" in out  # the sweep's own summary is still printed


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [(["--verify-top", "0"], r"--verify-top must be a positive integer, not 0"),
     (["--verify-top", "2", "--verify-scale", "2"], r"--verify-scale must be a number in \(0, 1\], not '2'"),
     (["--verify-scale", "0.5"], r"--verify-scale needs --verify-top K"),
     (["--verify-top", "1", "--storage", "memory:"], r"--verify-top needs a storage that outlives the sweep"),
     (["--verify-top", "1", "ACCEL_DSE_SIM_CACHE_MB=-1"],
      r"ACCEL_DSE_SIM_CACHE_MB must be a positive number of MiB, not '-1'")],
)
def test_verify_options_are_checked_before_the_sweep(run_cli, tmp_path, tiny, extra, pattern, monkeypatch):
    import re

    for item in [e for e in extra if "=" in e]:  # an environment setting, not an argument
        monkeypatch.setenv(*item.split("=", 1))
        extra = [e for e in extra if e != item]

    code, out, err = run_cli(*_args(tmp_path, tiny, *extra))
    assert code == 2 and out == ""
    assert re.search(pattern, err.strip()), err
    assert not (tmp_path / "run").exists()  # nothing was run or created
