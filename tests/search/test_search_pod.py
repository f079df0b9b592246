"""Pod spaces: chip, system and split axes in one sweep, scored by perf_model.pod, with constraints
on tokens/s and HBM (the ``[llm]``, ``[system]`` and ``[split]`` tables of a space file)."""

from __future__ import annotations

import json

import optuna
import pytest

from accel_dse.search import PodEvaluator, load_space, parse_space
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError
from accel_spec.pod_config import Split, SystemConfig
from perf_model.pod import evaluate_split, evaluate_system
from tests.cli_testlib import assert_one_line_error

LLM = {"model": "llama7b:layers=2,d=256,heads=4,ffn=512,vocab=1024", "mode": "train", "batch": 16, "seq": 64}
POD = {
    "name": "tiny-pod",
    "objectives": ["step_time", "area"],
    "constraints": ["tokens_per_s >= 60000", "hbm_used_gib <= 0.25"],
    "llm": LLM,
    "params": {"rows": [8, 16], "cols": [8, 16], "input_bits": 16, "acc_bits": 64, "ifmap_sram_kib": 64,
               "weight_sram_kib": 64, "ofmap_sram_kib": 128, "dram_bytes_per_cycle": [16.0, 64.0], "tech_nm": 7},
    "system": {"topology": "torus2d", "dims": [2, 2], "hbm_gib": [0.005, 1.0], "link_gb_per_s": [5.0, 50.0]},
    "split": {"tp": [1, 2, 4], "pp": [1, 2], "zero": [0, 3]},
}
CHIP = ArrayConfig(rows=16, cols=16, input_bits=16, acc_bits=64, ifmap_sram_kib=64, weight_sram_kib=64,
                   ofmap_sram_kib=128, dram_bytes_per_cycle=64.0, tech_nm=7)


def pod_space(**changes):
    return parse_space({**POD, **changes}, source="test space")


def test_a_pod_space_has_chip_system_and_split_axes():
    space = pod_space()
    names = [p.name for p in space.free_params]
    assert names[:3] == ["idx_rows", "idx_cols", "idx_dram_bytes_per_cycle"]
    assert {"idx_system.hbm_gib", "idx_system.link_gb_per_s", "idx_split.tp", "idx_split.pp",
            "idx_split.zero"} <= set(names)
    assert space.pod is not None and not space.pod.split_searched and space.workloads == ()
    params = {p.name: 0 for p in space.free_params}
    assert space.design(params) == ArrayConfig(rows=8, cols=8, input_bits=16, acc_bits=64, ifmap_sram_kib=64,
                                               weight_sram_kib=64, ofmap_sram_kib=128, dram_bytes_per_cycle=16.0,
                                               tech_nm=7)
    choice = space.pod_choice(params)
    assert choice["system.hbm_gib"] == 0.005 and choice["split.tp"] == 1 and choice["system.cores"] == 1
    assert "pod" in space.to_dict() and pod_space(split=None).fingerprint != space.fingerprint
    assert load_space("pod-llama70b").pod is not None  # the shipped one parses


@pytest.mark.parametrize(("changes", "pattern"), [
    ({"llm": None, "workloads": ["mlp"]}, r"a \[system\] table needs an \[llm\] job"),
    ({"workloads": ["mlp"]}, r"a space with an \[llm\] job takes no \[\[workloads\]\]"),
    ({"objectives": ["latency"]}, r"'latency' is a single-chip figure; a space with an \[llm\] job has step_s"),
    ({"constraints": ["power_w <= 3"]}, r"single-chip figure"),
    ({"system": {"topology": "torus2d", "dims": [2, 2], "hbm_gib": 0}},
     r"system\.hbm_gib: system hbm_gib must be a positive finite number, not 0"),
    ({"system": {"topology": "torus2d", "dims": [2, 2], "link_gb_per_s": [-1.0, 5.0]}},
     r"system\.link_gb_per_s: system link_gb_per_s must be a positive finite number, not -1\.0"),
    ({"system": {"topology": "torus2d", "dims": [2, 2, 2]}}, r"\[system\]: system dims must have 2 entries"),
    ({"system": {"dims": [2, 2], "linkbw": 3}}, r"unknown key 'linkbw' in \[system\]"),
    ({"split": {"dp": [2]}}, r"unknown key 'dp' in \[split\] .*dp is what the chips leave"),
    ({"split": {"zero": [0, 5]}}, r"split\.zero: split zero must be no larger than 3, not 5"),
    ({"llm": {**LLM, "batch": 0}}, r"\[llm\]: llm job batch must be a positive integer, not 0"),
    ({"llm": {**LLM, "model": "gpt9"}}, r"unknown llm 'gpt9'"),
])
def test_bad_pod_tables(changes, pattern):
    doc = {**POD, **changes}
    doc = {k: v for k, v in doc.items() if v is not None}
    with pytest.raises(ConfigError, match=pattern):
        parse_space(doc, source="test space")


def test_system_objectives_need_an_llm_job():
    doc = {"name": "s", "objectives": ["tokens_per_s"], "workloads": ["mlp"], "params": {"rows": 8, "cols": 8}}
    with pytest.raises(ConfigError, match=r"'tokens_per_s' needs an \[llm\] job"):
        parse_space(doc, source="test space")


def test_the_evaluator_scores_what_perf_model_pod_scores():
    space = pod_space()
    evaluator = PodEvaluator(space.pod)
    choice = {"system.hbm_gib": 1.0, "system.link_gb_per_s": 5.0, "system.cores": 1, "system.pods": 1,
              "system.link_latency_us": 1.0, "system.dcn_gb_per_s": 0.0, "system.dcn_latency_us": 10.0,
              "split.tp": 2, "split.pp": 1, "split.ep": 1, "split.zero": 3, "split.microbatch": 1,
              "split.recompute": 0.0}
    got = evaluator.evaluate(CHIP, choice)
    system = SystemConfig(chip=CHIP, topology="torus2d", dims=(2, 2), hbm_gib=1.0, link_gb_per_s=5.0)
    want = evaluate_split(system, evaluator.job, Split(dp=2, tp=2, zero=3))
    assert got.feasible and want.ok
    assert got.metrics["step_s"] == want.metrics["step_s"]
    assert got.metrics["tokens_per_s"] == want.metrics["tokens_per_s"]
    assert got.metrics["area_mm2"] > 0 and got.details["split"]["dp"] == 2
    # too little HBM: infeasible with the reason; tp * pp not dividing the chips: the reason too
    small = evaluator.evaluate(CHIP, {**choice, "system.hbm_gib": 0.005})
    assert not small.feasible and "HBM" in small.reason
    odd = evaluator.evaluate(CHIP, {**choice, "split.tp": 4, "split.pp": 2})
    assert not odd.feasible and "tp * pp = 8 must divide the system's 4 chips" in odd.reason
    # without a [split] table each trial searches the split: the best one perf_model.pod finds
    searched = PodEvaluator(pod_space(split=None).pod).evaluate(CHIP, choice)
    best = evaluate_system(system, evaluator.job)
    assert searched.metrics["step_s"] == best.metrics["step_s"] <= got.metrics["step_s"]


def test_a_sweep_codesigns_chip_system_and_split_under_tokens_and_hbm_constraints(run_cli, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "pod.toml"
    path.write_text(_toml(POD))
    code, out, err = run_cli("sweep", "--space", str(path), "--trials", "24", "--sampler", "random", "--seed", "1",
                             "--storage", "sqlite:///s.db")
    assert code == 0, err
    assert "Pareto set" in out and "split.tp" in out
    study = optuna.load_study(study_name="tiny-pod", storage="sqlite:///s.db")
    statuses = {}
    for trial in study.trials:
        attrs = trial.user_attrs
        statuses.setdefault(attrs["status"], []).append(trial)
        if attrs["status"] == "ok":
            assert attrs["metrics"]["tokens_per_s"] >= 60000 and attrs["metrics"]["hbm_used_gib"] <= 0.25
            assert attrs["pod"]["split"]["tp"] == attrs["pod_choice"]["split.tp"]
        if attrs["status"] == "constraint":
            assert attrs["metrics"]["tokens_per_s"] < 60000 or attrs["metrics"]["hbm_used_gib"] > 0.25
    assert statuses.get("ok") and statuses.get("constraint") and statuses.get("infeasible")
    reasons = " ".join(t.user_attrs["reason"] for t in statuses["infeasible"])
    assert "HBM" in reasons
    code, out, err = run_cli("sweep", "--space", str(path), "--trials", "2", "--sampler", "grid",
                             "--storage", "sqlite:///g.db")
    assert_one_line_error(code, out, err, r"the grid sampler scores single chips")


def test_a_sweep_samples_the_splits_people_use_as_axes(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    split = {"tp": [1, 2], "pp": [1, 2], "microbatch": [1, 2], "zero": [1, 3], "recompute": 0.0,
             "selective": [False, True], "sequence_parallel": [False, True], "interleave": [1, 2],
             "zero_gather": ["layer", "tensor"]}
    space = pod_space(split=split)
    names = {p.name for p in space.free_params}
    # numbers are ordered axes (searched by position), flags and names choices
    assert {"split.selective", "split.sequence_parallel", "idx_split.interleave", "split.zero_gather"} <= names
    path = tmp_path / "pod.toml"
    path.write_text(_toml({**POD, "split": split}))
    code, out, err = run_cli("sweep", "--space", str(path), "--trials", "20", "--sampler", "random", "--seed", "3",
                             "--storage", "sqlite:///s.db")
    assert code == 0, err
    trials = optuna.load_study(study_name="tiny-pod", storage="sqlite:///s.db").trials
    for key in ("selective", "sequence_parallel", "interleave", "zero_gather"):
        assert len({t.user_attrs["pod_choice"][f"split.{key}"] for t in trials}) == 2, key
    scored = [t for t in trials if t.user_attrs["status"] != "infeasible"]
    assert scored
    for t in scored:  # the split evaluated is the one sampled
        for key in ("selective", "sequence_parallel", "interleave", "zero_gather"):
            assert t.user_attrs["pod"]["split"][key] == t.user_attrs["pod_choice"][f"split.{key}"]
    # interleaving without pipeline stages is refused with the reason, not scored
    lone = [t for t in trials if t.user_attrs["pod_choice"]["split.interleave"] == 2
            and t.user_attrs["pod_choice"]["split.pp"] == 1]
    assert all("interleave needs pipeline stages" in t.user_attrs["reason"] for t in lone)


def test_a_preset_keeps_its_rings_and_shared_cache_in_a_pod_space():
    from accel_dse.search.space.pod_space import build_system

    space = pod_space(system={"preset": "h100-cluster", "dims": [2]})
    params = {p.name: 0 for p in space.free_params}
    system = build_system(CHIP, space.pod, space.pod_choice(params))
    assert (system.l2_mib, system.l2_gb_per_s, system.dcn_rings, system.dims) == (47.68, 5500.0, "flat", (2,))


@pytest.mark.parametrize(("changes", "pattern"), [
    ({"capacity_factor": [0.0, 100.0]}, r"split\.capacity_factor: split capacity_factor must be 0 .dropless."),
    ({"interleave": [0, 2]}, r"split\.interleave: split interleave must be a positive integer, not 0"),
    ({"zero_gather": ["layer", "block"]}, r"split\.zero_gather: split zero_gather must be one of layer, tensor"),
    ({"selective": [False, 1]}, r"split\.selective: split selective must be true or false, not 1"),
])
def test_bad_split_axes_name_the_value_and_the_rule(changes, pattern):
    with pytest.raises(ConfigError, match=pattern):
        pod_space(split={"tp": [1, 2], **changes})


def _toml(doc: dict) -> str:
    lines = []
    for key in ("name", "objectives", "constraints"):
        lines.append(f"{key} = {json.dumps(doc[key])}")
    for table in ("llm", "params", "system", "split"):
        lines.append(f"[{table}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in doc[table].items()]
    return "\n".join(lines) + "\n"
