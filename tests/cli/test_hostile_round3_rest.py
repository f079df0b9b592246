"""Third hostile round, the rest: bounded error output, --full-scale with any other --scale, the SDC
campaign script's options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_fifty_thousand_unknown_keys_are_twenty_lines_and_a_count(run_cli, tmp_path):
    design = tmp_path / "many.toml"
    design.write_text("[design]\nrows = 4\ncols = 4\n" + "".join(f"bogus_{i} = 1\n" for i in range(50_000)))
    code, out, err = run_cli("design", "check", str(design))
    lines = err.strip().splitlines()
    assert code == 2 and not out
    assert len(lines) == 21, len(lines)
    assert all("unknown key 'bogus_" in line for line in lines[:20])
    assert lines[-1] == "accel-dse: error: ... and 49,980 more"
    code, out, err = run_cli("design", "check", str(design), "--json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and json.loads(err)["kind"] == "config"


@pytest.mark.parametrize("scale", ["0.01", "0.5", "1e-2"])
def test_full_scale_refuses_any_other_scale(run_cli, tmp_path, scale):
    from hostile_testlib import one_line

    db = tmp_path / "x.db"
    line = one_line(*run_cli("verify", "--full-scale", "--scale", scale, "--storage", f"sqlite:///{db}",
                             "--study", "s", "--top", "1", "--simulator", "icarus"))
    assert line == f"--full-scale runs the ops at full scale: --scale {scale} does not go with it", line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, expected", [
    (["--seed", "-1"], "--seed must be an integer in [0, 4,294,967,295], not -1"),
    (["--clean", "1000000000"], "--clean must be an integer in [0, 100,000], not 1,000,000,000"),
    (["--rows", "4096"], "--rows must be an integer in [1, 32], not 4,096"),
    (["--rows", "4096", "--cols", "4096"], "--rows must be an integer in [1, 32], not 4,096"),
    (["--cols", "0"], "--cols must be an integer in [1, 32], not 0"),
    (["--faults-at", "pe_psum=1_0"], "--faults-at takes place=count pairs, not 'pe_psum=1_0'"),
    (["--seed", "1_0"], "argument --seed: must be an integer"),
])
def test_the_sdc_campaign_checks_its_options_first(tmp_path, argv, expected):
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "sdc_campaign.py"), *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and not proc.stdout, proc.stderr[-2000:]
    assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len([line for line in proc.stderr.splitlines() if "error" in line or expected in line]) == 1


def test_verify_top_on_a_pod_space_is_refused_before_the_search(run_cli, tmp_path):
    from hostile_testlib import one_line

    db = tmp_path / "pod.db"
    line = one_line(*run_cli("sweep", "--space", "pod-llama70b", "--storage", f"sqlite:///{db}", "--trials", "2",
                             "--verify-top", "1", "--quiet"))
    assert line.startswith("--verify-top simulates the designs on the space's workloads, and space 'pod-llama70b' "
                           "has none"), line
    assert list(tmp_path.iterdir()) == []  # no study was made, no search ran
