"""simulate runs a conv from NHWC activations in DRAM on Icarus (a batch on Verilator too), and chains,
reshaped and stacked convs on ``tiny``'s Verilator build: bit-exact against lax.conv, the RTL's total
cycles equal to the program walk (a batch's: evaluate's); a conv that does not fit on chip is refused
with one line."""

from __future__ import annotations

import dataclasses
import json

import pytest

import perf_model
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from perf_model.compiler.conv import conv_tiling
from perf_model.compiler.scorers import conv_path
from workloads import Workload
from workloads.ops import Conv2d

TINY = load_design("tiny")  # 4x4 WS, ifmap/weight 4 KiB, ofmap 8 KiB, 4-byte AXI
#: The simulator of the fault-free runs on ``tiny`` itself (chains, space-to-depth, stacked rows, conv
#: paths): Verilator, whose one flat build of ``tiny`` (its DRAM model is 16 MiB whatever the workload)
#: the session builds anyway (the batch below, test_sim_sampled, test_sim_end_to_end); Icarus builds each
#: DRAM size of its own and pays every simulated cycle (the dense pair and its ops apart: 13.6 against 2.6
#: CPU-s with warm builds). Icarus still runs the convs from NHWC, the batch and the filter tile here.
TINY_SIMULATOR = "verilator"
HEADER = "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"


@pytest.mark.parametrize("double", [True, False])
def test_a_conv_runs_from_nhwc_in_dram_bit_exact_in_the_walks_cycles(double, sim_cache, tmp_path):
    csv = tmp_path / "convs.csv"
    # shapes the model runs on chip (fewer cycles than the host's im2col GEMM): 3 channel words, stride 2; one word
    csv.write_text(HEADER + "s2, 9, 8, 3, 3, 12, 8, 2,\nk3, 8, 8, 3, 3, 4, 8, 1,\n")
    report = simulate(dataclasses.replace(TINY, double_buffered=double), str(csv), simulator="icarus",
                      work_dir=sim_cache)
    assert any(note.startswith("2 conv op(s) run from NHWC activations in DRAM") for note in report.notes), report.notes
    for op in report.ops:
        assert op.status == "pass", op.reason
        assert op.mismatches == 0 and op.total_cycles_match
        assert op.cycles_rtl == op.cycles_model


def test_a_conv_too_wide_for_the_ifmap_is_refused_with_one_line(run_cli, sim_cache, tmp_path):
    csv = tmp_path / "wide.csv"
    csv.write_text(HEADER + "wide, 4, 1500, 3, 3, 4, 4, 1,\n")
    code, out, err = run_cli("simulate", "--design", "tiny", "--workload", str(csv), "--simulator", "icarus",
                             "--json", "--work-dir", str(sim_cache))
    assert code == 2 and out == ""
    error = json.loads(err.strip().splitlines()[-1])["error"]  # --json: the error as one JSON line
    assert "'wide'" in error and "4500 ifmap words" in error, err  # 3 rows x 1500 pixels x 1 word
    assert "Traceback" not in err


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_a_batch_of_images_runs_stacked_in_one_program_as_the_model_scores_it(simulator, sim_cache):
    # 3 channels on 4 rows, stride 2 "same": the model's tiling runs both images in each run
    conv = Conv2d(n=2, h=8, w=8, c_in=3, c_out=4, kh=3, kw=3, stride_h=2, stride_w=2, pad_h=1, pad_w=1, name="s2b")
    assert conv_path(TINY, conv) == ("chip", "") and conv_tiling(TINY, conv).rows_t == 2 * conv.out_h
    workload = Workload(name="w", ops=(conv,), counts=(1,))
    report = simulate(TINY, workload, simulator=simulator, work_dir=sim_cache)
    model = perf_model.evaluate(TINY, workload).ops[0]
    (op,) = report.ops
    assert op.status == "pass", op.reason
    assert op.mismatches == 0 and op.total_cycles_match
    # the batch's one program, as evaluate scores it
    assert op.cycles_total_rtl == op.cycles_total_model == model.total_cycles


@pytest.mark.parametrize("n, groups", [(1, 1), (2, 8)], ids=["dense", "batched_depthwise"])
def test_a_chained_3x3_pair_runs_from_one_program_with_its_link_on_chip(sim_cache, n, groups):
    """Two requantised 3x3 convs, the second reading the first's output: one program (the first's
    output MOVEd into the ifmap, read in place by the second's window), the network's output bit-exact
    against the chain of lax.conv references, total cycles == the walk (and the model's, which keeps
    the chain); with reuse off, each op on its own. Also two images of a depthwise pair (MobileNetV2's
    chains are depthwise, the model keeps batched ones)."""
    from workloads.ops import Requant

    rq = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)
    convs = tuple(Conv2d(n=n, h=6, w=6, c_in=8, c_out=8, kh=3, kw=3, pad_h=1, pad_w=1, groups=groups, requant=rq,
                         name=f"c{i}", a_from_previous=i > 0) for i in range(2))
    workload = Workload(name="pair", ops=convs, counts=(1, 1))
    report = simulate(TINY, workload, simulator=TINY_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass", op.reason
    assert op.mismatches == 0 and op.total_cycles_match
    assert any("kept in the ifmap as the next conv's NHWC input" in note for note in report.notes), report.notes
    model = perf_model.evaluate(TINY, workload)
    assert [o.on_chip for o in model.ops] == ["out", "in"]
    assert op.cycles_total_rtl == sum(o.total_cycles for o in model.ops)
    apart = simulate(TINY, workload, simulator=TINY_SIMULATOR, work_dir=sim_cache, reuse=False)
    assert [o.name for o in apart.ops] == ["c0", "c1"] and all(o.status == "pass" for o in apart.ops)


def test_a_workload_runs_the_chains_the_model_keeps_each_from_one_program(sim_cache):
    """Simulating a whole workload (no ``ops``): the chain of convs the model keeps on chip runs as
    the one program the model scored (an op named by its convs), the op after it from its own; every
    op bit-exact, the chain's RTL total == the model's two chained ops' total cycles."""
    from workloads.ops import Gemm, Requant

    rq = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)
    convs = tuple(Conv2d(n=1, h=6, w=6, c_in=8, c_out=8, kh=3, kw=3, pad_h=1, pad_w=1, requant=rq,
                         name=f"c{i}", a_from_previous=i > 0) for i in range(2))
    workload = Workload(name="pair+fc", ops=(*convs, Gemm(m=4, k=16, n=4, requant=rq, name="fc")), counts=(1, 1, 1))
    model = perf_model.evaluate(TINY, workload)
    assert [o.on_chip for o in model.ops] == ["out", "in", ""]
    report = simulate(TINY, workload, simulator=TINY_SIMULATOR, work_dir=sim_cache)
    assert [o.name for o in report.ops] == ["c0+c1", "fc"]
    assert all(o.status == "pass" and o.mismatches == 0 and o.total_cycles_match for o in report.ops), report.ops
    assert report.ops[0].cycles_total_rtl == model.ops[0].total_cycles + model.ops[1].total_cycles
    assert any(note.startswith("1 chain(s) of convs kept on chip") and "c0 -> c1" in note for note in report.notes)


@pytest.mark.parametrize("conv", [
    Conv2d(n=1, h=12, w=12, c_in=1, c_out=6, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3, name="stem"),
    Conv2d(n=1, h=9, w=10, c_in=1, c_out=4, kh=5, kw=5, stride_h=2, stride_w=2, pad_h=2, pad_w=2, name="odd"),
], ids=["stem_7x7", "odd_rows"])
def test_a_strided_conv_runs_over_its_space_to_depth_input_as_the_model_scores_it(sim_cache, conv):
    """A strided conv with few channels that the model scores faster reshaped (space-to-depth):
    the RTL runs the reshaped program on the reshaped image and the output is the conv's own,
    bit-exact against lax on the original input and weights, total cycles == evaluate's. ``odd``:
    9 rows, so the last block of rows is completed with zeros. (Reshaped pixels of at most ``tiny``'s
    4 rows: the scorer tries no wider ones.)"""
    from workloads.ops import Requant

    conv = dataclasses.replace(conv, requant=Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8))
    workload = Workload(name="s2d", ops=(conv,), counts=(1,))
    model = perf_model.evaluate(TINY, workload).ops[0]
    assert model.conv_path == "chip" and model.conv_note.startswith("space-to-depth 2x2"), model.conv_note
    report = simulate(TINY, workload, simulator=TINY_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.status == "pass" and op.mismatches == 0 and op.total_cycles_match, op.reason
    assert op.cycles_total_rtl == model.total_cycles
    assert any("the host reshapes" in note and f"{conv.name} (space-to-depth" in note for note in report.notes)


def test_a_conv_runs_with_its_kernel_rows_stacked_as_the_model_scores_it(sim_cache):
    """A 1-channel 3x3 conv of dilation 2 on ``tiny``: its 3 kernel rows stacked as channels (3 of 4
    lanes, ``row_stack``) make a one-row kernel the model scores fastest; the RTL runs that program
    on the stacked image (vertical pads written as zeros by the host), bit-exact against lax on the
    conv's own input and weights, in ``evaluate``'s cycles. Its program stores each output tile as
    one DRAM row of its pixels' words (``conv._one_row``)."""
    from accel_spec.isa import Buffer, Opcode
    from perf_model.compiler.conv import compile_conv
    from perf_model.compiler.conv_score import conv_form
    from workloads.ops import Requant

    conv = Conv2d(n=1, h=11, w=9, c_in=1, c_out=4, kh=3, kw=3, dilation_h=2, pad_h=2, pad_w=1, name="dil",
                  requant=Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8))
    workload = Workload(name="stack", ops=(conv,), counts=(1,))
    model = perf_model.evaluate(TINY, workload).ops[0]
    assert model.conv_path == "chip" and model.conv_note.startswith("3 rows stacked: 3 channels"), model.conv_note
    program = compile_conv(TINY, conv_form(TINY, conv, True), requant=True)
    stores = [c for c in program.commands if c.opcode == Opcode.STORE and c["buffer"] == Buffer.OFMAP]
    assert stores and all(c["rows"] == 1 and c["words"] > 1 for c in stores)
    report = simulate(TINY, workload, simulator=TINY_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.status == "pass" and op.mismatches == 0 and op.total_cycles_match, op.reason
    assert op.cycles_total_rtl == model.total_cycles
    assert any(f"dil ({model.conv_note})" in note for note in report.notes), report.notes


def test_a_filter_tile_of_two_runs_keeps_its_weights_in_both_halves(sim_cache):
    """16 channels 3x3 on ``tiny`` with a 1 KiB weight buffer: a filter tile is two runs (two channel
    blocks, one per half of the buffer) and the output two tiles of rows. The weights are loaded
    twice, not once a run (the other half still holds the tile before the last, ``conv._place``);
    bit-exact, in ``evaluate``'s cycles."""
    from accel_spec.isa import Buffer, Opcode
    from perf_model.compiler.conv import compile_conv
    from perf_model.compiler.conv_score import program_bytes
    from workloads.ops import Requant

    design = dataclasses.replace(TINY, weight_sram_kib=1, ofmap_sram_kib=1)
    conv = Conv2d(n=1, h=8, w=8, c_in=16, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1, name="two",
                  requant=Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8))
    program = compile_conv(design, conv, requant=True)
    loads = [c for c in program.commands if c.opcode == Opcode.LOAD and c["buffer"] == Buffer.WEIGHT]
    assert len(program.runs) == 4 and len({r[1] for r in program.runs}) == 2 and len(loads) == 2
    workload = Workload(name="two", ops=(conv,), counts=(1,))
    model = perf_model.evaluate(design, workload).ops[0]
    assert model.conv_path == "chip" and model.dram_read_bytes == sum(program_bytes(design, program)[:2])
    report = simulate(design, workload, simulator="icarus", work_dir=sim_cache)
    (op,) = report.ops
    assert op.status == "pass" and op.mismatches == 0 and op.total_cycles_match, op.reason
    assert op.cycles_total_rtl == model.total_cycles


def test_conv_path_chip_runs_a_conv_the_model_leaves_to_the_host_with_windows_on_chip(sim_cache):
    """Two 2-channel 5x5 convs on ``tiny``: the model scores the host's im2col GEMM faster, and
    ``simulate`` follows it by default; with ``conv_path="chip"`` each builds its windows on chip,
    bit-exact, in the cycles ``evaluate`` names for that path ("windows on chip N"), and a note says
    which convs left the model's path."""
    import re

    from accel_spec.errors import SimulationError
    from workloads.ops import Requant

    rq = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)
    conv = Conv2d(n=1, h=5, w=5, c_in=2, c_out=2, kh=3, kw=3, pad_h=1, pad_w=1, requant=rq, name="c0")
    workload = Workload(name="host", ops=(conv,), counts=(1,))
    model = perf_model.evaluate(TINY, workload).ops[0]
    assert model.conv_path == "host"
    on_chip = int(re.search(r"windows on chip ([\d,]+)", model.conv_note).group(1).replace(",", ""))
    default = simulate(TINY, workload, simulator=TINY_SIMULATOR, work_dir=sim_cache)
    assert default.ops[0].cycles_total_rtl == model.total_cycles != on_chip
    forced = simulate(TINY, workload, simulator=TINY_SIMULATOR, work_dir=sim_cache, conv_path="chip")
    (op,) = forced.ops
    assert op.status == "pass" and op.mismatches == 0 and op.total_cycles_match, op.reason
    assert op.cycles_total_rtl == on_chip
    assert any(note.startswith("conv_path 'chip'") and note.endswith(": c0") for note in forced.notes), forced.notes
    with pytest.raises(SimulationError, match="conv_path must be 'model' or 'chip', not 'gemm'"):
        simulate(TINY, workload, simulator=TINY_SIMULATOR, work_dir=sim_cache, conv_path="gemm")
