"""``simulate --waves-around-mismatch N``: the STORE that wrote an output element, from the program
the compiler emitted and the program walk's issue cycles, and a traced re-run of the N cycles
before it (Icarus; the window read from the FST header, its size against a whole-run trace)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tests.simulate.test_sim_waves_window import CLOCK_PS, fst_times

GEMM = "gemm:m=64,k=4,n=32"  # on tiny (4x4 WS): two output tiles of 16 columns, one STORE each


def _program():
    import perf_model
    import workloads
    from accel_dse.design_files import load_preset

    design = load_preset("tiny")
    gemm = workloads.resolve(GEMM).ops[0].to_gemm()
    return design, perf_model.compile_gemm(design, gemm, requant=False)


def _stores(program):
    from accel_spec.isa import Opcode

    return [i for i, cmd in enumerate(program.commands) if cmd.opcode == Opcode.STORE]


def test_the_store_of_an_element_is_its_output_tiles():
    """Two output tiles, columns 0..15 and 16..31 of C, each stored by one STORE in run order:
    C[0, 20] is written by the second STORE though row 0 is C's first row; every element of C is
    written by the one STORE whose DRAM rows cover its address (counted here from the fields)."""
    from accel_dse.simulate.mismatch_store import store_for_element
    from accel_spec.isa import DRAM_LATENCY

    design, program = _program()
    stores = _stores(program)
    assert len(stores) == 2 and [r[4:6] for r in program.runs] == [(0, 16), (16, 32)]

    def store(i, j):
        return store_for_element(design, program, i, j, latency=DRAM_LATENCY)

    assert [store(i, j).command for i, j in ((0, 0), (63, 15), (0, 16), (0, 20), (63, 31))] == \
        [stores[0], stores[0], stores[1], stores[1], stores[1]]
    c = program.tensors["c"]
    assert not c.transposed and c.elem_bytes == 4  # WS, raw int32 accumulators: rows of N
    for i in range(64):
        for j in range(32):
            at = store(i, j)
            assert at.command == stores[j // 16]
            cmd = program.commands[at.command]
            address = c.base + i * c.pitch + 4 * j
            assert at.address == address and (address - cmd["dram_addr"]) // cmd["dram_stride"] == i
    # the second store issues later, inside the program's walk
    import perf_model

    first, second = store(0, 0).issue, store(0, 16).issue
    assert 0 < first < second < perf_model.gemm_program_cycles(design, program, latency=DRAM_LATENCY).total


def test_the_window_is_before_the_store_and_covers_it():
    from accel_dse.simulate.mismatch_store import TAIL_MARGIN, mismatch_window

    window = mismatch_window(1_000, 20, 300)
    assert (window.first, window.cycles) == (700, 300 + 20 + TAIL_MARGIN)
    assert mismatch_window(100, 20, 300).first == 0  # never before the run


def test_the_option_needs_icarus_and_no_waves(run_cli, tmp_path):
    def line(*extra):
        code, _out, err = run_cli("simulate", "--design", "tiny", "--workload", GEMM, "--work-dir", str(tmp_path),
                                  *extra)
        assert code == 2 and "Traceback" not in err
        return err

    assert "needs --simulator icarus" in line("--simulator", "verilator", "--waves-around-mismatch", "10")
    assert "leave out --waves" in line("--simulator", "icarus", "--waves", "--waves-around-mismatch", "10")
    assert "positive number of cycles, not 0" in line("--simulator", "icarus", "--waves-around-mismatch", "0")


@pytest.fixture
def corrupted_reference(monkeypatch):
    """A forced mismatch: the reference of C[0][0, 20] of every op is off by one (the RTL is right)."""
    from accel_dse.simulate.dram import driver

    real = driver.check_dram

    def check(job, *args, **kwargs):
        expected = np.array(job.expected)
        expected[0, 0, 20] += 1
        return real(dataclasses.replace(job, expected=expected), *args, **kwargs)

    monkeypatch.setattr(driver, "check_dram", check)


def test_a_mismatch_is_traced_around_its_store(sim_cache, corrupted_reference):
    from accel_dse.design_files import load_preset
    from accel_dse.simulate import simulate
    from accel_dse.simulate.mismatch_store import TAIL_MARGIN

    design, program = _program()
    lines: list[str] = []
    before = 40
    report = simulate(load_preset("tiny"), GEMM, simulator="icarus", work_dir=sim_cache,
                      waves_around_mismatch=before, progress=lines.append)
    op = report.ops[0]
    assert op.mismatches == 1 and op.first_mismatches[0].index == (0, 0, 20)
    at = op.mismatch_store
    assert at is not None and at["command"] == _stores(program)[1]  # the second tile's STORE, not row 0's first
    assert at["cycle"] == at["queue_load_start"] + at["issue"] and at["queue_load_start"] > 0
    assert at["issue"] < op.cycles_total_rtl  # inside the program the RTL ran (== the model's walk)
    trace = Path(report.waves)
    first, last = at["cycle"] - before, at["cycle"] + at["store_cycles"] + TAIL_MARGIN
    last = min(last, 3 + op.sim_cycles)  # never past the run's end (reset, then the one op)
    start, end = fst_times(trace)
    assert start == first * CLOCK_PS  # N cycles before the store's issue
    assert at["cycle"] * CLOCK_PS < (last - 1) * CLOCK_PS <= end <= last * CLOCK_PS  # the store, to the run's end
    assert any(f"issued at cycle {at['cycle']:,} of the run" in line for line in lines)
    assert any(f"tracing cycles {first:,}..{last - 1:,}" in note for note in report.notes)
    # the window's trace is smaller than the whole run's
    whole = simulate(load_preset("tiny"), GEMM, simulator="icarus", work_dir=sim_cache, waves=True)
    assert fst_times(Path(whole.waves))[0] == 0
    assert trace.stat().st_size < Path(whole.waves).stat().st_size


def test_no_mismatch_means_no_trace(sim_cache):
    from accel_dse.design_files import load_preset
    from accel_dse.simulate import simulate

    report = simulate(load_preset("tiny"), GEMM, simulator="icarus", work_dir=sim_cache, waves_around_mismatch=40)
    assert report.passed and report.waves == ""
    assert any("no output differed from JAX; nothing traced" in note for note in report.notes)
