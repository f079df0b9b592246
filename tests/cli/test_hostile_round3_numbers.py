"""Third hostile round: numbers from files and studies, one integer parser, the uncuttable pod job."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from hostile_testlib import one_line
from report_testlib import make_study

SYSTEMS = Path(__file__).resolve().parents[2] / "accel_dse" / "systems"


@pytest.fixture(scope="module")
def garbage_study(tmp_path_factory):
    """A study whose newest trial records NaN and inf in its config and metrics, and a verify record
    with NaN cycles and a non-numeric, incomplete FPGA result (as an old or foreign writer might)."""
    from accel_dse.search import open_storage, parse_storage

    folder = tmp_path_factory.mktemp("garbage")
    url = f"journal:{folder / 's.journal'}"
    make_study(url, trials=4)
    study = optuna.load_study(study_name="s", storage=open_storage(parse_storage(url)))
    best = study.best_trial
    attrs = dict(best.user_attrs)
    attrs["config"] = {**attrs["config"], "clock_mhz": float("nan")}
    attrs["metrics"] = {**attrs.get("metrics", {}), "edp": float("nan"), "area_mm2": float("inf")}
    study.add_trial(optuna.trial.create_trial(params=best.params, distributions=best.distributions,
                                              values=[v * 0.5 for v in best.values], user_attrs=attrs))
    number = study.trials[-1].number
    study.set_user_attr(f"accel_dse.verify.{number}", {
        "passed": True, "rtl_cycles": float("nan"), "fpga": {"fmax_mhz": "fast", "used": {"luts": float("inf")}}})
    study.set_user_attr(f"accel_dse.verify.{best.number}", {"passed": True, "fpga": ["not", "a", "table"]})
    return url, number


@pytest.mark.parametrize("as_json", [False, True])
def test_a_report_of_a_study_with_nan_and_garbage_shows_dashes(run_cli, tmp_path, garbage_study, as_json):
    url, number = garbage_study
    code, out, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "r"),
                             *(["--json"] if as_json else []))
    assert code == 0, err
    assert "Traceback" not in err and "NaN" not in out
    if as_json:
        document = json.loads(out)  # strict JSON: no NaN
        (row,) = [f for f in document["fpga"] if f["trial"] == number]
        assert row["fmax_mhz"] is None and row["luts"] is None and row["line"] == "-"
    else:
        assert f"fpga trial {number}: -, no model" in out
    assert (tmp_path / "r" / "report.json").is_file()


def test_hbm_gib_that_overflows_is_refused_where_the_file_is_read(run_cli, tmp_path):
    text = (SYSTEMS / "a100-cluster.toml").read_text()
    lines = [("hbm_gib = 1e308" if line.startswith("hbm_gib") else line) for line in text.splitlines()]
    if not any(line.startswith("hbm_gib") for line in lines):
        lines.insert(lines.index("[system]") + 1, "hbm_gib = 1e308")
    path = tmp_path / "big.toml"
    path.write_text("\n".join(lines) + "\n")
    line = one_line(*run_cli("system", "evaluate", "--system", str(path), "--model", "llama7b", "--batch", "16"))
    assert "system hbm_gib must be at most 1e+12, not 1e+308" in line, line
    code, out, err = run_cli("system", "evaluate", "--system", str(path), "--model", "llama7b", "--json")
    assert code == 2 and not out and json.loads(err)["kind"] == "config", err


@pytest.mark.parametrize("argv, expected", [
    (("--model", "llama7b:layers=1_000"), "llm option layers must be an integer, not '1_000'"),
    (("--model", "llama7b:layers=\uff18"), "llm option layers must be an integer"),
    (("--model", "llama7b", "--dims", "2_0"), "--dims must be integers separated by commas, not '2_0'"),
    (("--model", "llama7b", "--split", "dp=0x8"), "--split dp must be a number, not '0x8'"),
])
def test_one_integer_parser_for_system_options(run_cli, argv, expected):
    line = one_line(*run_cli("system", "evaluate", "--system", "a100-cluster", *argv))
    assert expected in line, line


def test_batch_with_an_underscore_is_a_usage_error(run_cli):
    code, out, err = run_cli("system", "evaluate", "--system", "a100-cluster", "--model", "llama7b", "--batch", "1_6")
    assert code == 2 and not out and "argument --batch: must be an integer" in err, err


def test_a_job_no_split_can_cut_is_one_line(run_cli):
    line = one_line(*run_cli("system", "evaluate", "--system", "a100-cluster", "--pods", "3", "--model", "llama7b",
                             "--batch", "16"))
    assert line.startswith("no split of the 24 chips (3 pod(s) of 8) can cut llama7b at batch 16"), line
