"""``report --workload`` with a workload that cannot be read fails like every other command (exit 2,
nothing written) unless ``--best-effort`` is given."""

from __future__ import annotations

import pytest
from hostile_testlib import one_line, snapshot
from report_testlib import make_study


@pytest.fixture(scope="module")
def study_url(tmp_path_factory):
    url = f"journal:{tmp_path_factory.mktemp('study') / 's.journal'}"
    make_study(url, trials=4)
    return url


@pytest.mark.parametrize("workload, shown", [
    ("{tmp}/missing.onnx", "does not exist"),
    ("{tmp}/bad.yaml", "problem.shape.dimensions must be a flat list of dimension names"),
    ("gemm:m=８", "gemm option m must be a positive integer"),
])
def test_report_with_a_bad_workload(run_cli, tmp_path, study_url, workload, shown):
    (tmp_path / "bad.yaml").write_text("problem:\n  shape: {dimensions: 7}\n  instance: {M: 8, N: 8, K: 8}\n")
    spec = workload.format(tmp=tmp_path)
    before = snapshot(tmp_path)
    line = one_line(*run_cli("report", "--storage", study_url, "--study", "s", "--out", str(tmp_path / "r"),
                             "--workload", spec))
    assert shown in line, line
    assert snapshot(tmp_path) == before  # no report folder

    code, out, err = run_cli("report", "--storage", study_url, "--study", "s", "--out", str(tmp_path / "r"),
                             "--workload", spec, "--best-effort")
    assert code == 0, err
    assert f"note: no per-op breakdown on {spec}:" in out and shown in out
    assert (tmp_path / "r" / "index.html").is_file()
