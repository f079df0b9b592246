"""The full-scale sampled check (``simulate(mode="sampled")``): what it simulates, that it catches
faults in what it simulates and at tile edges, that it refuses a broken class rule, and that its
cycles are the exhaustive simulation's.

Expected data come from JAX (the checker's reference); expected cycles from a second, exhaustive
simulation of the same op on the same build (the RTL's own counters), never from the plan.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perf_model
import rtl_gen
import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from accel_dse.simulate.dram.driver import DRAM_LATENCY
from accel_dse.simulate.dram.sampled import output_tiles, plan_sampled, signature
from accel_spec.errors import SimulationError
from accel_spec.isa import Command, Opcode
from tests.simulate.block_testlib import LONG_RUN_SIMULATOR
from workloads.ops import Conv2d

TINY = load_design("tiny")  # 4x4 WS, double buffered, 4 KiB operand buffers
REPEATING = "gemm:m=400,k=80,n=40,requant=1"  # 16 output tiles, several of each class
SMALL = "gemm:m=96,k=80,n=40,requant=1"  # every output tile a class of its own


def _program(design, spec: str):
    (op,) = workloads.resolve(spec).ops
    return perf_model.compile_gemm(design, op.to_gemm(), requant=op.requant is not None)


def _walk(design):
    return lambda cmds, base: perf_model.program_cycles(design, cmds, queue_base=base, latency=DRAM_LATENCY)


@pytest.mark.parametrize("df,double", [("ws", True), ("ws", False), ("os", True), ("is", True)])
def test_the_plan_simulates_every_class_and_the_first_and_last_tiles(df, double):
    design = dataclasses.replace(TINY, dataflow=df, double_buffered=double)
    program = _program(design, REPEATING)
    plan = plan_sampled(program, _walk(design))
    checked = {g for w in plan.windows for g in w.tiles}
    assert 0 in checked and len(plan.tiles) - 1 in checked
    assert {signature(program, plan.tiles, g) for g in checked} == \
        {signature(program, plan.tiles, g) for g in range(len(plan.tiles))}
    assert plan.runs_simulated < plan.runs_total  # something is fast-forwarded
    assert 0 < plan.skipped_model < plan.total_model


def test_a_broken_class_rule_is_refused():
    program = _program(TINY, REPEATING)
    tiles = output_tiles(program)
    sizes_only = lambda p, t, g: (t[g].box[1] - t[g].box[0], t[g].box[3] - t[g].box[2])  # noqa: E731
    with pytest.raises(SimulationError, match="class rule refused"):
        plan_sampled(program, _walk(TINY), rule=sizes_only)
    with pytest.raises(SimulationError, match="class rule refused"):
        plan_sampled(program, _walk(TINY), rule=lambda p, t, g: 0)
    assert len(tiles) > 2


def _c_bytes(report) -> np.ndarray:
    from pathlib import Path

    with np.load(Path(report.run_dir) / "results" / "op_0000.npz") as data:
        return data[sorted(k for k in data.files if k.startswith("c_"))[-1]]


def test_sampled_cycles_equal_the_exhaustive_simulation(sim_cache):
    whole = simulate(TINY, SMALL, mode="sampled", work_dir=sim_cache)
    (op,) = whole.ops
    assert whole.mode == "sampled" and op.status == "pass", op.reason
    assert op.sampled["fraction_simulated"] == 1.0 and op.sampled["cycles_skipped_model"] == 0
    exhaustive = simulate(TINY, SMALL, work_dir=sim_cache)
    (ref,) = exhaustive.ops
    assert exhaustive.mode == "exhaustive" and ref.sampled is None and ref.status == "pass"
    assert op.cycles_total_rtl == ref.cycles_total_rtl and op.cycles_rtl == ref.cycles_rtl

    part = simulate(TINY, REPEATING, mode="sampled", work_dir=sim_cache)
    (op,) = part.ops
    assert op.status == "pass", op.reason
    s = op.sampled
    assert s["runs_simulated"] < s["runs_total"] and s["tiles_checked"] < s["tiles_total"]
    assert op.cycles_total_rtl == s["cycles_simulated_rtl"] == s["cycles_simulated_model"]
    full = simulate(TINY, REPEATING, work_dir=sim_cache)
    (ref,) = full.ops
    assert ref.status == "pass" and ref.tiles == s["runs_total"]
    assert s["op_cycles_model"] == ref.cycles_total_rtl  # what the sampled check fast-forwards on is the RTL's


def test_a_fault_in_a_simulated_run_fails_the_sampled_check(sim_cache):
    report = simulate(TINY, REPEATING, mode="sampled", work_dir=sim_cache, fault=rtl_gen.Fault(1, 2, 0, 1))
    (op,) = report.ops
    assert op.status == "fail" and op.mismatches > 0
    assert op.sampled["runs_simulated"] < op.sampled["runs_total"]


def test_an_off_by_one_in_the_last_tiles_address_fails_the_sampled_check(sim_cache, monkeypatch):
    compile_gemm = perf_model.compile_gemm

    def off_by_one(*args, **kwargs):  # the last output tile's STORE one DRAM row too far
        program = compile_gemm(*args, **kwargs)
        cmds = list(program.commands)
        last = max(i for i, c in enumerate(cmds) if c.opcode == Opcode.STORE)
        fields = dict(cmds[last].fields)
        fields["dram_addr"] += program.tensors["c"].pitch
        cmds[last] = Command.make(cmds[last].opcode, wait_dma=cmds[last].wait_dma, wait_run=cmds[last].wait_run,
                                  **fields)
        return dataclasses.replace(program, commands=tuple(cmds))

    monkeypatch.setattr(perf_model, "compile_gemm", off_by_one)
    report = simulate(TINY, REPEATING, mode="sampled", work_dir=sim_cache)
    (op,) = report.ops
    assert op.status == "fail" and op.mismatches > 0, op.reason
    m0, _, n0, _ = output_tiles(compile_gemm(TINY, workloads.resolve(REPEATING).ops[0].to_gemm(),
                                              requant=True))[-1].box
    assert op.first_mismatches
    assert all(m.index[1] >= m0 and m.index[2] >= n0 for m in op.first_mismatches)  # the last tile's only
    assert op.cycles_total_rtl == op.cycles_total_model  # the cycles alone would not have caught it


def test_sampled_needs_full_scale_and_a_known_mode():
    with pytest.raises(SimulationError, match="scale 1"):
        simulate(TINY, SMALL, mode="sampled", scale=0.5)
    with pytest.raises(SimulationError, match="mode must be"):
        simulate(TINY, SMALL, mode="quick")


def test_shared_module_builds_give_the_flat_builds_results(sim_cache, monkeypatch):
    from accel_dse.simulate.runner import build as _build

    flat = simulate(TINY, SMALL, work_dir=sim_cache)
    monkeypatch.setattr(_build, "SHARED_MODULE_SUFFIXES", ("_row", "_pe"))
    shared = simulate(TINY, SMALL, work_dir=sim_cache)
    top = shared.design["top"]
    vlts = [p.read_text() for p in (sim_cache / "builds").glob(f"{top}-verilator-*/{top}.vlt")
            if (p.parent / "build.json").is_file()]  # finished builds (the cache is shared by the workers)
    assert any("no_inline" in v for v in vlts) and any("no_inline" not in v for v in vlts)  # two builds
    (a,), (b,) = shared.ops, flat.ops
    assert a.status == b.status == "pass"
    assert (a.cycles_total_rtl, a.cycles_rtl, a.stall_cycles_rtl) == (b.cycles_total_rtl, b.cycles_rtl,
                                                                      b.stall_cycles_rtl)
    assert np.array_equal(_c_bytes(shared), _c_bytes(flat))


def test_hierarchical_row_builds_give_the_flat_builds_results(sim_cache, monkeypatch):
    from accel_dse.simulate.runner import build as _build

    assert _build.hier_blocks_for(TINY.rows, TINY.cols) == ()  # 16 PEs: flat by default
    flat = simulate(TINY, SMALL, work_dir=sim_cache)
    monkeypatch.setattr(_build, "HIER_MIN_PES", 1)
    hier = simulate(TINY, SMALL, work_dir=sim_cache)
    top = hier.design["top"]
    (built,) = [p for p in (sim_cache / "builds").glob(f"{top}-verilator-*") if (p / "build.json").is_file()
                and "hier_block" in (p / f"{top}.vlt").read_text()]
    assert "--hierarchical" in (built / "build_spec.json").read_text()
    assert any(p.name.endswith("_row") for p in built.glob("V*"))  # the row verilated on its own
    (a,), (b,) = hier.ops, flat.ops
    assert a.status == b.status == "pass"
    assert (a.cycles_total_rtl, a.cycles_rtl, a.stall_cycles_rtl) == (b.cycles_total_rtl, b.cycles_rtl,
                                                                      b.stall_cycles_rtl)
    assert np.array_equal(_c_bytes(hier), _c_bytes(flat))


# A conv the model runs on chip in bands of image rows: 20 output tiles (10 classes), the second
# window starts after a WINDOW command it does not hold (tiny, double buffered).
BANDED = Conv2d(n=1, h=40, w=40, c_in=4, c_out=8, kh=3, kw=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1,
                name="banded")


def test_a_conv_on_chip_is_cut_into_classes_and_a_window_replays_the_window_registers():
    from perf_model.compiler.conv import compile_conv
    from perf_model.compiler.scorers import conv_path

    assert conv_path(TINY, BANDED)[0] == "chip"
    program = compile_conv(TINY, BANDED)
    plan = plan_sampled(program, _walk(TINY))
    assert plan.runs_simulated < plan.runs_total
    later = [w for w in plan.windows if w.first > 0]
    assert later
    for w in later:  # the last WINDOW before the window is replayed in its prologue
        last = max(i for i in range(w.first) if program.commands[i].opcode == Opcode.WINDOW)
        assert last in w.prologue
    # the window registers a tile starts with are part of its class: the same commands after another
    # WINDOW are another class
    tiles = output_tiles(program)
    g = next(g for g in range(1, len(tiles) - 1)
             if not any(c.opcode == Opcode.WINDOW for c in program.commands[tiles[g].start:tiles[g].store_end]))
    cmds = list(program.commands)
    before = max(i for i in range(tiles[g].start) if cmds[i].opcode == Opcode.WINDOW)
    fields = dict(cmds[before].fields)
    fields["pad_left"] ^= 1
    cmds[before] = Command.make(Opcode.WINDOW, wait_dma=cmds[before].wait_dma, wait_run=cmds[before].wait_run,
                                **fields)
    changed = dataclasses.replace(program, commands=tuple(cmds))
    assert signature(changed, tiles, g) != signature(program, tiles, g)


def test_a_sampled_conv_is_bit_exact_in_the_exhaustive_runs_cycles_and_catches_a_fault(sim_cache):
    workload = workloads.Workload(name="w", ops=(BANDED,), counts=(1,))
    part = simulate(TINY, workload, mode="sampled", work_dir=sim_cache)
    (op,) = part.ops
    assert op.status == "pass" and op.mismatches == 0, op.reason
    s = op.sampled
    assert s["runs_simulated"] < s["runs_total"] and s["tiles_checked"] < s["tiles_total"]
    assert op.cycles_total_rtl == s["cycles_simulated_model"]
    (ref,) = simulate(TINY, workload, work_dir=sim_cache).ops
    assert ref.status == "pass" and ref.sampled is None
    assert s["op_cycles_model"] == ref.cycles_total_rtl  # what it fast-forwards on is the RTL's whole conv
    (bad,) = simulate(TINY, workload, mode="sampled", work_dir=sim_cache, fault=rtl_gen.Fault(1, 2, 0, 1)).ops
    assert bad.status == "fail" and bad.mismatches > 0


def test_a_vector_unit_built_as_a_hierarchical_block_gives_the_flat_builds_results(sim_cache, monkeypatch):
    from accel_dse.simulate.runner import build as _build
    from workloads import Gemm, VectorOp, Workload
    from workloads import _int_ops as io

    design = dataclasses.replace(TINY, vector_unit=True)
    act = VectorOp(kind="gelu", shape=(8, 40), axis=None, params=tuple(io.GELU_PARAMS.items()), name="act")
    workload = Workload(name="vec", ops=(Gemm(m=8, k=16, n=8, name="proj"),), vector_ops=(act,),
                        vector_counts=(1,), vector_after=(1,))
    # the flat reference: the flat Verilator build of this top the decoder and encoder tests' long runs
    # share (block_testlib.LONG_RUN_SIMULATOR), built once per run whichever test comes first
    flat = simulate(design, workload, work_dir=sim_cache, simulator=LONG_RUN_SIMULATOR)
    monkeypatch.setattr(_build, "HIER_MIN_PES", 1)
    hier = simulate(design, workload, work_dir=sim_cache, simulator="verilator")
    top = hier.design["top"]
    (built,) = [p for p in (sim_cache / "builds").glob(f"{top}-verilator-*") if (p / "build.json").is_file()
                and "hier_block" in (p / f"{top}.vlt").read_text()]
    assert any(p.name.endswith("_vector") for p in built.glob("V*"))  # the unit verilated on its own
    assert [op.name for op in hier.ops] == [op.name for op in flat.ops] and len(hier.ops) == 2
    for a, b in zip(hier.ops, flat.ops, strict=True):
        assert a.status == b.status == "pass", (a.reason, b.reason)
        assert (a.cycles_total_rtl, a.cycles_rtl) == (b.cycles_total_rtl, b.cycles_rtl)
    assert np.array_equal(_c_bytes(hier), _c_bytes(flat))
