"""`accel-dse design check`: the DRAM part and node a design has (and when they are the defaults), and
the power density against ``max_power_density_w_mm2`` on a workload (not checked without one)."""

from __future__ import annotations

import json
import re

import perf_model
import workloads
from accel_dse.design_files import load_design

_GEMM = "gemm:m=256,k=256,n=256"


def _write(tmp_path, body):
    path = tmp_path / "d.toml"
    path.write_text("[design]\nrows = 32\ncols = 32\ntech_nm = 7\nclock_mhz = 1500.0\n" + body)
    return str(path)


def test_a_design_naming_no_dram_or_node_is_told_the_defaults(run_cli, tmp_path):
    code, out, err = run_cli("design", "check", "tiny")
    assert code == 0 and err == ""
    assert '# dram = "none" (the default): no part named' in out and "30.5 pJ/bit" in out
    assert "# tech_nm = 45 (the default)" in out
    code, out, _ = run_cli("design", "check", "tpu-v1")
    assert code == 0 and '# dram = "ddr3-2133-2x64": 34.1 GB/s, 30.5 pJ/bit' in out and "# tech_nm = 28\n" in out


def test_without_a_workload_the_density_is_not_checked(run_cli):
    code, out, _ = run_cli("design", "check", "tiny")
    assert code == 0 and "# power density: not checked (it needs a workload" in out
    assert "max_power_density_w_mm2 = 1\n" in out and "max_power_density_w_mm2 = 1.0\n" in out  # the line, the table
    code, out, _ = run_cli("design", "check", "tiny", "--json")
    assert json.loads(out)["power_density"] == {"checked": False, "limit_w_mm2": 1.0}


def test_with_a_workload_the_density_is_printed_against_the_designs_limit(run_cli, tmp_path):
    density = perf_model.evaluate(load_design(_write(tmp_path, "")), workloads.resolve(_GEMM)).total[
        "power_density_w_mm2"]
    code, out, _ = run_cli("design", "check", _write(tmp_path, ""), "--workload", _GEMM)
    assert code == 0
    line = re.search(r"# power density on \S+: ([0-9.e+-]+) W/mm\^2 .*", out)
    assert line and float(line.group(1)) == float(f"{density:.3g}")
    assert "within the limit (max_power_density_w_mm2 = 1)" in line.group(0)
    # the same design with a limit below its density: over, and the density still shown
    code, out, _ = run_cli("design", "check", _write(tmp_path, f"max_power_density_w_mm2 = {density / 2}\n"),
                           "--workload", _GEMM, "--json")
    report = json.loads(out)["power_density"]
    assert code == 0 and report["over"] is True and report["checked"] is True
    assert report["power_density_w_mm2"] == density and report["limit_w_mm2"] == density / 2


def test_a_design_infeasible_on_the_workload_says_why_the_density_is_not_checked(run_cli, tmp_path):
    path = _write(tmp_path, "ifmap_sram_kib = 1\nweight_sram_kib = 1\nofmap_sram_kib = 1\n")
    code, out, _ = run_cli("design", "check", path, "--workload", "gemm:m=4096,k=4096,n=4096")
    assert code == 0 and "not checked, the design is infeasible there:" in out


def test_a_bad_limit_in_a_design_file_is_one_line(run_cli, tmp_path):
    code, out, err = run_cli("design", "check", _write(tmp_path, "max_power_density_w_mm2 = 0\n"))
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "max_power_density_w_mm2 must be a positive finite number, not 0" in err
