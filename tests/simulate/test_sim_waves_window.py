"""``simulate --waves`` within bounds: the size estimate refuses a window over the limit (naming the
window that fits), and a windowed Icarus run writes only that window (FST header times, size)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from accel_dse.simulate.waves import (
    DEFAULT_LIMIT_BYTES,
    WavesWindow,
    bytes_per_cycle,
    signal_bits,
    waves_plan,
)
from accel_spec.errors import SimulationError
from tests.simulate.test_sim_waves import fst_names

CLOCK_PS = 10_000  # accel_dse.simulate.run_plan.CLOCK_PERIOD_NS in the FST's 1 ps unit


def fst_times(path: Path) -> tuple[int, int]:
    """The first and last timestamps of an FST file (its header block: start_time, end_time)."""
    data = path.read_bytes()
    assert data[0] == 0, "not an FST file (no header block first)"
    return struct.unpack(">QQ", data[9:25])


def test_signal_bits_counts_vectors_and_skips_memories():
    verilog = ("module m(clk, a, y);\n  input clk;\n  wire clk;\n  input [7:0] a;\n  wire [7:0] a;\n"
               "  output [3:0] y;\n  reg [3:0] y = 4'h0;\n"
               "  reg [15:0] \\acc$3 ;\n  wire w;\n  reg [7:0] mem [0:1023];\nendmodule\n")
    assert signal_bits(verilog) == 1 + 8 + 4 + 16 + 1


def test_a_window_over_the_limit_is_refused_with_the_window_that_fits():
    bits = 61_374  # tiny's traced bits
    per_cycle = bytes_per_cycle(bits, "fst")
    fits = int(DEFAULT_LIMIT_BYTES // per_cycle)
    with pytest.raises(SimulationError) as caught:
        waves_plan(WavesWindow(500, fits + 1), run_cycles=10 * fits, bits=bits, fmt="fst")
    message = str(caught.value)
    assert "\n" not in message
    assert f"--waves-from 500 --waves-cycles {fits} fits" in message and "--waves-limit-mb" in message
    plan = waves_plan(WavesWindow(500, fits), run_cycles=10 * fits, bits=bits, fmt="fst")
    assert plan.expected_bytes <= DEFAULT_LIMIT_BYTES and plan.window == WavesWindow(500, fits)
    # raising the limit lets the larger window through
    assert waves_plan(WavesWindow(500, fits + 1), run_cycles=10 * fits, bits=bits, fmt="fst",
                      limit_bytes=2 * DEFAULT_LIMIT_BYTES).window.cycles == fits + 1


def test_the_window_is_clipped_to_the_run_and_must_start_inside_it():
    plan = waves_plan(WavesWindow(90), run_cycles=100, bits=10, fmt="vcd")
    assert plan.window == WavesWindow(90, 10)
    with pytest.raises(SimulationError, match="past the run's end"):
        waves_plan(WavesWindow(100), run_cycles=100, bits=10, fmt="fst")


def test_verilator_traces_whole_runs_only():
    with pytest.raises(SimulationError, match="need --simulator icarus"):
        waves_plan(WavesWindow(0, 5), run_cycles=100, bits=10, fmt="fst", windows=False)
    with pytest.raises(SimulationError, match="--simulator icarus --waves-from 0 --waves-cycles"):
        waves_plan(WavesWindow(), run_cycles=10**9, bits=10**5, fmt="fst", windows=False)


def test_the_cli_refuses_a_trace_over_the_limit_before_anything_runs(run_cli, tmp_path):
    work = tmp_path / "work"
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", "gemm:m=64,k=64,n=64",
                             "--simulator", "icarus", "--work-dir", str(work), "--waves", "--waves-limit-mb", "1")
    assert code == 2, out + err
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1 and "over the 1.00 MB limit" in lines[0] and "--waves-cycles" in lines[0], err
    assert "Traceback" not in err
    assert not (work / "builds").exists() and not (work / "runs").exists()  # refused before build and run


def test_the_window_needs_waves(run_cli, tmp_path):
    code, _out, err = run_cli("simulate", "--design", "tiny", "--workload", "gemm:m=8,k=8,n=8",
                              "--simulator", "icarus", "--work-dir", str(tmp_path), "--waves-cycles", "5")
    assert code == 2 and "add --waves" in err


def test_a_window_run_writes_only_that_window(run_cli, sim_cache):
    base = ("simulate", "--design", "tiny", "--workload", "gemm:m=8,k=8,n=8", "--simulator", "icarus",
            "--work-dir", str(sim_cache), "--waves")
    traces = []
    for extra in ((), ("--waves-from", "100", "--waves-cycles", "50")):
        code, out, err = run_cli(*base, *extra)
        assert code == 0, out + err
        assert "waves: cycles" in err and "expected about" in err  # the size, said before the run
        traces.append(Path(next(line for line in out.splitlines() if line.startswith("waves: "))
                           .removeprefix("waves: ")))
    whole, window = traces
    assert fst_times(window) == (100 * CLOCK_PS, 150 * CLOCK_PS)
    assert fst_times(whole)[0] == 0 and fst_times(whole)[1] > 250 * CLOCK_PS  # 271 cycles (the model's)
    assert window.stat().st_size < whole.stat().st_size
    assert "array" in fst_names(window)


def test_the_exported_runner_traces_a_window_and_says_how_long_its_build_takes(tmp_path):
    import os
    import subprocess
    import sys

    from accel_dse.design_files import load_preset
    from accel_dse.export import export_design

    out = tmp_path / "tiny"
    export_design(load_preset("tiny"), out, synth=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST")}
    proc = subprocess.run([sys.executable, "run.py", "--simulator", "icarus", "--target", "core", "--waves",
                           "--waves-from", "10", "--waves-cycles", "20"],
                          cwd=out, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "[icarus] building" in proc.stdout and ": about " in proc.stdout and " s on 2 cores" in proc.stdout
    trace = out / "sim_build" / "icarus" / "waves.fst"
    assert fst_times(trace) == (10 * CLOCK_PS, 30 * CLOCK_PS)
