"""accel-dse system evaluate|presets|models: output, JSON and one-line errors."""

from __future__ import annotations

import json

import pytest
from cli_testlib import assert_one_line_error

SMALL = ("--system", "tpu-v5e-pod", "--dims", "2,2", "--model", "qwen3_moe_30b:layers=4", "--seq", "256")


def test_train_json_has_the_metrics_and_the_split(run_cli):
    code, out, err = run_cli("system", "evaluate", *SMALL, "--batch", "16", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "ok" and data["chips"] == 4
    assert {"step_s", "mfu", "tokens_per_s", "tokens_per_s_per_chip", "energy_j"} <= set(data["metrics"])
    assert {"compute_s", "exposed_comm_s", "bubble_s"} <= set(data["breakdown"])
    assert data["split"]["dp"] * data["split"]["tp"] * data["split"]["pp"] == 4
    assert data["memory"]["total"] <= data["memory"]["hbm_bytes"] == 16 * 2**30  # v5e: 16 GiB of HBM a chip
    m = data["metrics"]
    # a step trains batch 16 x seq 256 = 4,096 tokens, over 4 chips
    assert m["tokens_per_s"] == pytest.approx(4096 / m["step_s"], rel=1e-12)
    assert m["tokens_per_s_per_chip"] == pytest.approx(1024 / m["step_s"], rel=1e-12)


def test_serve_table_and_a_given_split(run_cli):
    code, out, err = run_cli("system", "evaluate", *SMALL, "--mode", "serve", "--batch", "8", "--gen", "4",
                             "--split", "dp=4,ep=4,microbatch=2")
    assert code == 0, err
    assert "split: dp=4 tp=1 pp=1 ep=4" in out
    assert "ttft_s" in out and "tpot_s" in out and "memory per chip" in out


def test_fix_keeps_the_given_fields_and_searches_the_rest(run_cli):
    code, out, err = run_cli("system", "evaluate", "--system", "tpu-v5e-pod", "--dims", "2,2", "--model",
                             "llama7b:layers=6", "--seq", "256", "--batch", "16", "--fix", "pp=4,sequence_parallel=1",
                             "--json")
    assert code == 0, err
    data = json.loads(out)
    # 6 layers on 4 stages (uneven): pp kept, the microbatch, ZeRO stage and recomputation searched
    assert data["split"]["pp"] == 4 and data["split"]["sequence_parallel"] is True
    assert data["splits_searched"] == 5 * 3 * 2  # microbatch 1-16, ZeRO 0/1/3, recompute 0/1


def test_serving_objectives_rank_by_ttft_or_tpot(run_cli):
    tpots = {}
    for objective in ("throughput", "tpot"):
        code, out, err = run_cli("system", "evaluate", *SMALL, "--mode", "serve", "--batch", "16", "--gen", "8",
                                 "--objective", objective, "--json")
        assert code == 0, err
        tpots[objective] = json.loads(out)["metrics"]["tpot_s"]
    assert tpots["tpot"] <= tpots["throughput"]


def test_a_split_beyond_hbm_is_reported_infeasible(run_cli):
    code, out, err = run_cli("system", "evaluate", "--system", "tpu-v5e-pod", "--dims", "1,1", "--model", "llama70b",
                             "--batch", "1", "--split", "dp=1")
    assert code == 0, err
    assert "infeasible: needs" in out and "HBM" in out


def test_presets_and_models_list(run_cli):
    code, out, _ = run_cli("system", "presets")
    assert code == 0 and "tpu-v4-pod" in out and "a100-cluster" in out
    code, out, _ = run_cli("system", "models")
    assert code == 0 and "qwen3_moe_235b" in out


@pytest.mark.parametrize("extra,pattern", [
    (("--split", "dp=3"), r"dp \* tp \* pp = 3 must equal the system's chips \(4\)"),
    (("--split", "dp=2,tp=2,zero=1", "--batch", "3"), r"must divide the batch"),
    (("--split", "tp=4", "--model", "qwen3_moe_30b:layers=4,heads=6,kv_heads=2,expert_ffn=766"),
     r"tp=4 must divide the model's FFN width \(766\)"),
    (("--split", "dp=1,pp=4", "--model", "llama7b:layers=3"), r"pp=4 must be at most the model's layers \(3\)"),
    (("--split", "dp=1,pp=4,interleave=2", "--model", "llama7b:layers=6"),
     r"pp \* interleave = 4 \* 2 must be at most the model's layers \(6\)"),
    (("--split", "dp=1,interleave=2"), r"split interleave needs pipeline stages"),
    (("--split", "dp=4,zero_gather=bogus"), r"split zero_gather must be one of layer, tensor, not 'bogus'"),
    (("--split", "bogus=1"), r"--split item 'bogus=1' must be KEY=VALUE"),
    (("--fix", "tp=3"), r"--fix tp=3: no split of 4 chips has tp=3"),
    (("--fix", "bogus=1"), r"--fix item 'bogus=1' must be KEY=VALUE"),
    (("--fix", "tp=2", "--split", "dp=2,tp=2"), r"--fix narrows the split search and --split gives the whole split"),
    (("--objective", "ttft"), r"--objective ttft ranks serving runs \(--mode serve\)"),
    (("--split", "dp=4,ep=3"), r"split ep must divide dp"),
    (("--dims", "2,2,2"), r"dims must have 2 entries for a torus2d, not 3"),
    (("--batch", "0"), r"--batch must be a positive integer, not 0"),
    (("--model", "gpt9"), r"unknown llm 'gpt9'"),
])
def test_bad_input_is_one_line_exit_2(run_cli, extra, pattern):
    argv = list(SMALL)
    if "--model" in extra:
        i = argv.index("--model")
        del argv[i:i + 2]
    code, out, err = run_cli("system", "evaluate", *argv, *extra)
    assert_one_line_error(code, out, err, pattern)


def test_bad_system_files_are_one_line_exit_2(run_cli, tmp_path):
    bad_bw = tmp_path / "s.toml"
    bad_bw.write_text("[system]\nchip = 'edge'\ntopology = 'ring'\ndims = [4]\nlink_gb_per_s = 0\n")
    code, out, err = run_cli("system", "evaluate", "--system", str(bad_bw), "--model", "llama7b")
    assert_one_line_error(code, out, err, r"link_gb_per_s must be a positive finite number, not 0")
    bad_dims = tmp_path / "d.toml"
    bad_dims.write_text("[system]\nchip = 'edge'\ntopology = 'torus2d'\ndims = [4, 4]\nchips = 12\n")
    code, out, err = run_cli("system", "evaluate", "--system", str(bad_dims), "--model", "llama7b")
    assert_one_line_error(code, out, err, r"make 16 chips, not the 12 chips given")


def test_figure_of_the_time_breakdown(run_cli, tmp_path):
    path = tmp_path / "breakdown.png"
    code, out, err = run_cli("system", "evaluate", *SMALL, "--batch", "16", "--figure", str(path))
    assert code == 0, err
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["breakdown.png"]  # no temporary file left
    code, out, err = run_cli("system", "evaluate", *SMALL, "--figure", str(tmp_path))
    assert_one_line_error(code, out, err, r"--figure must be a file name ending in \.png")
    code, out, err = run_cli("system", "evaluate", *SMALL, "--figure", str(tmp_path / "no" / "f.png"))
    assert_one_line_error(code, out, err, r"does not exist")
