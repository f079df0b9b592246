"""Numbers: dimensions beyond exact model arithmetic and out-of-range float fields are refused, the
same way by every command; designs at the edges of the ranges give finite, positive results."""

from __future__ import annotations

import json
import math

import pytest
from hostile_testlib import one_line, snapshot

BIG = str(2**63 - 1)


@pytest.mark.parametrize("argv", [
    ("evaluate", "--design", "tiny", "--workload", f"gemm:m={BIG},k=1,n=1"),
    ("workloads", "show", f"gemm:m={BIG},k=1,n=1"),
    ("evaluate", "--design", "tiny", "--workload", "gemm:m=2147483647,k=2147483647,n=2"),
    ("export", "--design", "tiny", "--no-synth", "--out", "{tmp}/e", "--workload", "gemm:m=65536,k=65536,n=65537"),
    ("simulate", "--design", "tiny", "--simulator", "icarus", "--workload", "gemm:m=65536,k=65536,n=65537"),
])
def test_dimensions_beyond_exact_arithmetic(run_cli, tmp_path, argv):
    before = snapshot(tmp_path)
    line = one_line(*run_cli(*(a.format(tmp=tmp_path) for a in argv)))
    assert "must be at most 2,147,483,647" in line or "beyond the 281,474,976,710,656 (2**48)" in line, line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("spec, limit", [
    ("mlp:layers=100000000", "mlp option layers must be at most 1,024, not 100,000,000"),
    ("bert_base:layers=5000", "at most 1,024"),
    ("dlrm_mlp:tables=4096", "at most 1,024"),
    ("gemm:m=2147483648", "gemm option m must be at most 2,147,483,647"),
])
def test_workload_options_have_upper_bounds(run_cli, spec, limit):
    line = one_line(*run_cli("workloads", "show", spec))
    assert limit in line, line


@pytest.mark.parametrize("field, value, rule", [
    ("clock_mhz", "1e308", "clock_mhz must be in [0.001, 100000], not 1e+308"),
    ("clock_mhz", "0.0001", "clock_mhz must be in [0.001, 100000]"),
    ("dram_bytes_per_cycle", "5e-324", "dram_bytes_per_cycle must be in [1e-06, 1e+09], not 5e-324"),
    ("dram_bytes_per_cycle", "1e10", "dram_bytes_per_cycle must be in [1e-06, 1e+09]"),
    ("dram_bytes_per_cycle", "nan", "must be a positive finite number"),
    ("clock_mhz", "-inf", "must be a positive finite number"),
    ("clock_mhz", "-1.0", "must be a positive finite number"),
    ("rows", "9223372036854775807", "rows must be no larger than 4096"),
])
def test_design_check_and_evaluate_agree_on_ranges(run_cli, tmp_path, field, value, rule):
    design = tmp_path / "d.toml"
    fields = {"rows": "4", "cols": "4", field: value}
    design.write_text("[design]\n" + "".join(f"{k} = {v}\n" for k, v in fields.items()))
    for argv in (("design", "check", str(design)), ("evaluate", "--design", str(design), "--workload", "gemm")):
        assert rule in one_line(*run_cli(*argv)), argv


# The fastest design at its node's reachable clock (1e5 MHz is beyond any logic's f_max: infeasible,
# tests/perf_model/test_model_infeasible.py) and the slowest at the range's ends.
EDGES = [
    "rows = 1\ncols = 1\nclock_mhz = 3000\ndram_bytes_per_cycle = 1e9\nifmap_sram_kib = 1\nweight_sram_kib = 1\n"
    "ofmap_sram_kib = 1\ntech_nm = 5\n",
    "rows = 4096\ncols = 4096\nclock_mhz = 1e-3\ndram_bytes_per_cycle = 1e-6\nifmap_sram_kib = 1048576\n"
    "weight_sram_kib = 1048576\nofmap_sram_kib = 1048576\ntech_nm = 180\nacc_bits = 64\ninput_bits = 16\n",
]


@pytest.mark.parametrize("body", EDGES)
@pytest.mark.parametrize("workload", ["gemm:m=65536,k=65536,n=65536", "gemm:m=1,k=1,n=1"])
def test_results_at_the_edges_are_finite_and_positive(run_cli, tmp_path, body, workload):
    design = tmp_path / "d.toml"
    design.write_text("[design]\n" + body)
    code, out, err = run_cli("evaluate", "--design", str(design), "--workload", workload, "--json")
    assert code == 0, err
    total = json.loads(out)["total"]
    for key in ("compute_cycles", "total_cycles", "energy_pj", "latency_s", "power_w", "edp", "area_mm2", "tops",
                "tops_per_w", "utilization", "macs"):
        assert isinstance(total[key], (int, float)) and math.isfinite(total[key]) and total[key] > 0, (key, total)
    assert total["stall_cycles"] >= 0 and total["total_cycles"] >= total["compute_cycles"]
