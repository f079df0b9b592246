"""Bad input to ``accel-dse simulate``: one clear line, a non-zero exit, nothing half-written."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accel_dse.simulate import OpResult, SimulationReport, build_design, find_simulator
from accel_spec.errors import SimulationError
from perf_model.compiler.program import output_major as _output_major
from tests.proc_testlib import alive, children

GEMM = "gemm:m=8,k=8,n=8"


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("accel-dse: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("scale", ["0", "1.5", "-0.2", "nan"])
def test_scale_outside_zero_one_is_refused(run_cli, scale, tmp_path):
    code, _, err = run_cli("simulate", "--design", "tiny", "--workload", GEMM, "--scale", scale,
                           "--work-dir", str(tmp_path))
    assert code == 2
    assert "scale must be a number in (0, 1]" in one_error_line(err)
    assert not (tmp_path / "builds").exists() and not (tmp_path / "runs").exists()


def test_unknown_op_lists_the_ops(run_cli, tmp_path):
    code, _, err = run_cli("simulate", "--design", "tiny", "--workload", "mlp", "--ops", "fc.0,fc.9",
                           "--work-dir", str(tmp_path))
    assert code == 2
    line = one_error_line(err)
    assert "unknown op 'fc.9'" in line and "fc.0, fc.1, fc.2, fc.3" in line


def test_ops_and_max_ops_exclude_each_other(run_cli):
    code, _, err = run_cli("simulate", "--design", "tiny", "--workload", "mlp", "--ops", "fc.0", "--max-ops", "1")
    assert code == 2 and "not allowed with argument" in err


@pytest.mark.parametrize("flag,value,message", [
    ("--max-ops", "0", "max_ops must be a positive integer"),
    ("--timeout", "0", "timeout must be a positive number of seconds"),
])
def test_bad_limits(run_cli, flag, value, message, tmp_path):
    code, _, err = run_cli("simulate", "--design", "tiny", "--workload", GEMM, flag, value,
                           "--work-dir", str(tmp_path))
    assert code == 2 and message in one_error_line(err)


def test_design_infeasible_for_the_tiles_gives_the_reason(run_cli, tmp_path):
    design = tmp_path / "big_array_small_buffers.toml"
    design.write_text("[design]\nrows = 64\ncols = 64\nifmap_sram_kib = 1\nweight_sram_kib = 1\n"
                      "ofmap_sram_kib = 1\n")
    code, _, err = run_cli("simulate", "--design", str(design), "--workload", GEMM, "--simulator", "icarus",
                           "--work-dir", str(tmp_path / "work"))
    assert code == 2
    line = one_error_line(err)
    # By hand: the 1 KiB ofmap holds 8192 / (64 lanes * 32 bits) = 4 words (2 per ping-pong
    # half), fewer than the 8 words of an 8 x 8 output tile (M * ceil(N / C)); the model
    # refuses the design and the message must carry its reason.
    assert "cannot run op 'gemm'" in line and "ofmap buffer" in line
    assert not (tmp_path / "work" / "builds").exists()


def test_work_dir_that_is_a_file_is_refused(run_cli, tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    code, _, err = run_cli("simulate", "--design", "tiny", "--workload", GEMM, "--simulator", "icarus",
                           "--work-dir", str(blocker / "sim"))
    assert code == 2 and "of --work-dir" in one_error_line(err) and "is a file, not a directory" in err


def test_missing_simulator_says_how_to_install(run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = run_cli("simulate", "--design", "tiny", "--workload", GEMM, "--simulator", "icarus",
                           "--work-dir", str(tmp_path / "work"))
    assert code == 2
    assert "apt-get install -y iverilog" in one_error_line(err)


def test_verilator_build_failure_names_its_log(sim_cache):
    broken = "module broken(input clk, output q);\n  assign q = ;\nendmodule\n"
    with pytest.raises(SimulationError, match=r"verilator build of broken failed.*log: ") as info:
        build_design(broken, top="broken", simulator=find_simulator("verilator"), work_dir=sim_cache)
    log = Path(str(info.value).rsplit("log: ", 1)[1])
    assert "%Error" in log.read_text()
    assert not (sim_cache / "builds" / log.parent.name.removesuffix(".failed") / "build.json").exists()


def test_timeout_kills_the_simulation_and_reports_timeout(run_cli, sim_cache):
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", "mlp", "--max-ops", "2",
                             "--simulator", "icarus", "--timeout", "0.5", "--json", "--work-dir", str(sim_cache))
    assert code == 1, err
    report = json.loads(out)
    assert report["passed"] is False
    assert [op["status"] for op in report["ops"]] == ["timeout", "timeout"]
    assert all("timeout" in op["reason"] for op in report["ops"])


def test_report_passes_only_when_every_op_passes():
    gemm = {"m": 1, "k": 1, "n": 1, "batch": 1}
    ok = OpResult(name="a", status="pass", gemm=gemm, cycles_rtl=10, cycles_model=10, sim_seconds=2.0,
                  sim_cycles=40)
    slow = OpResult(name="b", status="fail", gemm=gemm, cycles_rtl=11, cycles_model=10, reason="cycles")
    lost = OpResult(name="c", status="timeout", gemm=gemm, cycles_model=10)
    assert SimulationReport({}, "w", "icarus", (ok,)).passed
    report = SimulationReport({}, "w", "icarus", (ok, slow, lost))
    assert not report.passed and not SimulationReport({}, "w", "icarus", ()).passed
    assert (ok.cycles_match, slow.cycles_match, lost.cycles_match) == (True, False, False)
    assert ok.cycles_per_second == 20.0 and lost.cycles_per_second == 0.0
    totals = report.totals()
    assert (totals["pass"], totals["fail"], totals["timeout"], totals["cycles_rtl"]) == (1, 1, 1, 21)
    data = report.to_dict()
    assert {"design", "workload", "simulator", "ops", "passed"} <= set(data)
    json.dumps(data, allow_nan=False)


def test_runs_of_one_output_tile_are_made_consecutive():
    # a k-outer plan: (m0, m1, k0, k1, n0, n1, accumulate)
    k_outer = [(0, 4, 0, 8, 0, 4, False), (0, 4, 0, 8, 4, 8, False),
               (0, 4, 8, 12, 0, 4, True), (0, 4, 8, 12, 4, 8, True)]
    grouped = _output_major(k_outer)
    assert sorted(grouped) == sorted(k_outer)
    assert grouped == [k_outer[0], k_outer[2], k_outer[1], k_outer[3]]
    k_inner = [k_outer[0], k_outer[2], k_outer[1], k_outer[3]]
    assert _output_major(k_inner) == k_inner


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to find the simulator")
def test_sigterm_stops_the_simulator_too(tmp_path):
    """The simulator runs in its own session: SIGTERM to accel-dse must not leave it running."""
    find_simulator("icarus")  # the test needs Icarus (setup installs it): a missing one fails here
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    # The unscaled MLP takes hours in Icarus: it is certainly still running when the signal comes.
    proc = subprocess.Popen([sys.executable, "-m", "accel_dse", "simulate", "--design", "tiny", "--workload", "mlp",
                             "--simulator", "icarus", "--work-dir", str(tmp_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    group: list[int] = []
    try:
        leader = None
        for _ in range(1200):  # build, then the simulation starts (within a minute or two)
            kids = children(proc.pid)
            if any("vvp" in Path(f"/proc/{g}/cmdline").read_text(errors="replace")
                   for k in kids for g in [k, *children(k)] if alive(g)):
                leader = kids[0]
                break
            time.sleep(0.1)
        assert leader is not None, "the simulator never started"
        group += [leader, *children(leader)]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "interrupted" in err and "Traceback" not in err
        for _ in range(100):
            if not any(alive(p) for p in group):
                break
            time.sleep(0.1)
        assert not any(alive(p) for p in group)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in group:  # what a failed run left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
