"""The DRAM part is visible wherever a design's figures are: ``evaluate``'s totals, the sweep's summary
table and the report's rows (issue 52). ``"none"`` is shown as ideal memory."""

from __future__ import annotations

import types

from accel_dse.report._data import _row
from accel_dse.search import load_space
from accel_dse.search.study.summary import summary_table
from accel_spec.config import ArrayConfig

_GEMM = "gemm:m=64,k=64,n=64"


def _design(tmp_path, body: str = "") -> str:
    path = tmp_path / "d.toml"
    path.write_text("[design]\nrows = 8\ncols = 8\n" + body)
    return str(path)


def test_evaluate_names_the_part_and_ideal_memory(run_cli, tmp_path):
    code, out, _ = run_cli("evaluate", "--design", _design(tmp_path), "--workload", _GEMM)
    row = next(line for line in out.splitlines() if line.strip().startswith("DRAM part"))
    # the default part, its figures, and 16 B/cycle: min(16, 25.6 GB/s at 1 GHz)
    assert code == 0 and "lpddr5-x32 (25.6 GB/s, 5 pJ/bit; 16 B/cycle)" in row
    code, out, _ = run_cli("evaluate", "--design", _design(tmp_path, 'dram = "none"\n'), "--workload", _GEMM)
    row = next(line for line in out.splitlines() if line.strip().startswith("DRAM part"))
    assert code == 0 and "none (ideal memory)" in row and "no DRAM energy" in row


def test_the_sweep_summary_has_a_dram_column_unless_the_space_searches_it(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('name = "m"\nobjectives = ["edp"]\n[[workloads]]\nspec = "gemm:m=64,k=64,n=64"\n'
                    "[params]\nrows = [8, 16]\ncols = 8\n")
    space = load_space(path)
    best = [{"trial": 0, "params": {"rows": 8}, "values": {o.name: 1.0 for o in space.objectives}, "metrics": {},
             "config_hash": "h0", "design": ArrayConfig(rows=8, cols=8).to_dict()},
            {"trial": 1, "params": {"rows": 16}, "values": {o.name: 2.0 for o in space.objectives}, "metrics": {},
             "config_hash": "h1", "design": ArrayConfig(rows=16, cols=8, dram="none").to_dict()}]
    headers, rows = summary_table({"best": best}, space)
    column = headers.index("dram")
    assert [r[column] for r in rows] == ["lpddr5-x32", "none (ideal memory)"]
    searched = tmp_path / "t.toml"
    searched.write_text(path.read_text() + 'dram = ["lpddr5-x32", "hbm2e"]\n')
    headers, _ = summary_table({"best": []}, load_space(searched))
    assert headers.count("dram") == 1  # the free parameter's own column, not a second one


def test_a_report_row_names_the_part():
    view = types.SimpleNamespace(objectives=[], verification=lambda number: None)
    for dram, shown in (("hbm2e", "hbm2e"), ("none", "none (ideal memory)")):
        trial = types.SimpleNamespace(number=3, values=None, params={}, system_attrs={},
                                      user_attrs={"config": ArrayConfig(rows=8, cols=8, dram=dram).to_dict()})
        assert _row(view, trial, set())["dram"] == shown
