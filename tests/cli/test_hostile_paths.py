"""A name is never a path; a path is used as given, never extended, never created with parents."""

from __future__ import annotations

import pytest
from hostile_testlib import one_line, snapshot


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "a/b", "..", ".", "a\nb", "x" * 300, "", "a b", "é"])
def test_study_names_are_never_paths(run_cli, tmp_path, monkeypatch, name):
    work = tmp_path / "deep" / "cwd"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    line = one_line(*run_cli("sweep", "--study", name, "--trials", "1", "--quiet"))
    assert line.startswith("--study must be 1 to 100 letters, digits, '.', '_' or '-'"), line
    assert ("300 characters" in line) if len(name) == 300 else (repr(name) in line)
    assert sorted(snapshot(tmp_path)) == [str(tmp_path / "deep"), str(work)]  # nothing written anywhere


@pytest.mark.parametrize("table, rule", [
    ("/dev/full", "ending in .npz"),
    ("{tmp}/grid", "ending in .npz"),
    ("{tmp}/nosuchdir/grid.npz", "does not exist"),
    ("{tmp}", "ending in .npz"),
    ("{tmp}/sub.npz", "is a directory"),
    ("", "must name a path"),
])
def test_grid_table_is_used_as_given(run_cli, tmp_path, table, rule):
    (tmp_path / "sub.npz").mkdir()
    before = snapshot(tmp_path)
    line = one_line(*run_cli("sweep", "--sampler", "grid", "--storage", "memory:", "--grid-table",
                             table.format(tmp=tmp_path), "--quiet"))
    assert "--grid-table" in line and rule in line, line
    assert snapshot(tmp_path) == before


def test_empty_and_parentless_paths(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sim = ("simulate", "--design", "tiny", "--workload", "gemm")
    cases = [
        (("sweep", "--out-dir", "", "--trials", "1"), "--out-dir must name a path, not ''"),
        (("sweep", "--out-dir", "nosuch/run", "--trials", "1"), "'nosuch' of --out-dir 'nosuch/run' does not exist"),
        ((*sim, "--work-dir", ""), "--work-dir must name a path, not ''"),
        ((*sim, "--work-dir", "no/such"), "of --work-dir 'no/such' does not exist"),
        (("rtl", "verilog", "tiny", "-o", "nosuchdir/x.v"), "'nosuchdir' of -o 'nosuchdir/x.v' does not exist"),
        (("rtl", "verilog", "tiny", "-o", ""), "-o must name a path, not ''"),
        (("rtl", "verilog", "tiny", "-o", "/dev/null/x.v"), "'/dev/null' of -o '/dev/null/x.v' is a file, not a dir"),
    ]
    for argv, expected in cases:
        line = one_line(*run_cli(*argv))
        assert expected in line, (argv, line)
    assert list(tmp_path.iterdir()) == []


def test_out_dir_onto_a_file_and_a_grid_of_a_trillion_points(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("mine")
    space = tmp_path / "g.toml"
    space.write_text('name = "g"\nobjectives = ["edp"]\n[[workloads]]\nspec = "gemm:m=8,k=8,n=8"\n[params]\n'
                     "rows = 4\ncols = 4\nclock_mhz = { low = 100.0, high = 1000.0, step = 1e-12 }\n")
    before = snapshot(tmp_path)
    line = one_line(*run_cli("sweep", "--out-dir", "afile", "--trials", "1"))
    assert line == "--out-dir 'afile' is a file, not a directory"
    line = one_line(*run_cli("sweep", "--space", str(space), "--sampler", "grid", "--storage", "memory:"))
    assert "has 900,000,000,000,001 points; the grid sampler enumerates at most 10,000,000" in line  # not listed
    assert snapshot(tmp_path) == before
