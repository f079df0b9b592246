"""`accel-dse design check`: the DRAM part and node a design has (and when they are the defaults), the
power density bounds from the clock and size alone, and the density against ``max_power_density_w_mm2``
on a workload."""

from __future__ import annotations

import json
import re

import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design

_GEMM = "gemm:m=256,k=256,n=256"


def _write(tmp_path, body):
    path = tmp_path / "d.toml"
    path.write_text("[design]\nrows = 32\ncols = 32\ntech_nm = 7\nclock_mhz = 1500.0\n" + body)
    return str(path)


def test_a_design_naming_no_dram_or_node_is_told_the_defaults(run_cli, tmp_path):
    path = tmp_path / "plain.toml"
    path.write_text("[design]\nrows = 8\ncols = 8\n")
    code, out, err = run_cli("design", "check", str(path))
    assert code == 0 and err == ""
    # the named default part, its figures, and the rate it paces the default 16 B/cycle to at 1 GHz
    assert '# dram = "lpddr5-x32" (the default): 25.6 GB/s, 5 pJ/bit' in out
    assert "16 B/cycle at 1000 MHz" in out and 'dram = "lpddr5-x32"\n' in out  # the line, the table
    assert "# tech_nm = 45 (the default)" in out
    code, out, _ = run_cli("design", "check", "tpu-v1")
    assert code == 0 and '# dram = "ddr3-2133-2x64": 34.1 GB/s, 30.5 pJ/bit' in out and "# tech_nm = 28\n" in out
    # "none" is ideal memory, and says so
    path.write_text('[design]\nrows = 8\ncols = 8\ndram = "none"\n')
    code, out, _ = run_cli("design", "check", str(path))
    assert code == 0 and '# dram = "none": ideal memory' in out and "no DRAM energy" in out


def test_without_a_workload_the_density_is_bounded_from_the_clock_and_size(run_cli, tmp_path):
    code, out, _ = run_cli("design", "check", "tiny")
    assert code == 0 and "# power density on a workload: not checked (it needs one" in out
    assert "max_power_density_w_mm2 = 1)" in out and "max_power_density_w_mm2 = 1.0\n" in out  # the line, the table
    code, out, _ = run_cli("design", "check", _write(tmp_path, ""), "--json")
    report = json.loads(out)["power_density"]
    bounds = report["bounds"]
    assert report["checked"] is False and bounds["estimated"] is True and bounds["infeasible"] is False
    # by hand: the peak is the per-MAC dynamic energy at one MAC per PE per cycle, plus leakage
    peak_w = bounds["dynamic_pj_per_mac"] * 1e-12 * 32 * 32 * 1500e6 + bounds["floor_w_mm2"] * bounds["area_mm2"]
    assert bounds["peak_w_mm2"] == pytest.approx(peak_w / bounds["area_mm2"])
    # ... and it is an upper bound of the density on a real workload (the same design, busy on a GEMM)
    busy = perf_model.evaluate(load_design(_write(tmp_path, "")), workloads.resolve(_GEMM)).total
    assert bounds["floor_w_mm2"] < busy["power_density_w_mm2"] <= bounds["peak_w_mm2"]


def test_leakage_alone_over_the_limit_is_infeasible_in_check(run_cli, tmp_path):
    code, out, _ = run_cli("design", "check", _write(tmp_path, ""), "--json")
    bounds = json.loads(out)["power_density"]["bounds"]
    # a limit between the floor (leakage) and the peak: flagged only; below the floor: infeasible
    between = (bounds["floor_w_mm2"] + bounds["peak_w_mm2"]) / 2
    code, out, _ = run_cli("design", "check", _write(tmp_path, f"max_power_density_w_mm2 = {between}\n"))
    assert code == 0 and "the peak is over the limit" in out and "infeasible: leakage" not in out
    below = bounds["floor_w_mm2"] / 2
    code, out, _ = run_cli("design", "check", _write(tmp_path, f"max_power_density_w_mm2 = {below}\n"))
    assert code == 0 and "infeasible: leakage alone is OVER the limit" in out


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
