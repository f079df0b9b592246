"""simulate runs a workload's vector ops on the design's vector unit (designs with ``vector_unit``),
from DRAM through the command queue, bit-exact against their JAX integer definitions and in the
walk's total cycles (a RoPE with the table the host lays out in DRAM); what the unit cannot run
is named as host work; a design without the unit runs none of them."""

from __future__ import annotations

import dataclasses
import json

import perf_model
import rtl_gen
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from tests.simulate.block_testlib import (
    LONG_RUN_SIMULATOR,
    REQUANT,
    RESIDUAL_BLOCK,
    VECTOR_KINDS,
    VECTOR_RUNS,
    vector_op,
)
from workloads import Gemm, VectorOp, Workload
from workloads import _int_ops as io

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)


def test_the_vector_ops_run_on_the_unit_bit_exact_in_the_walks_cycles(sim_cache):
    report = simulate(TINY, VECTOR_KINDS, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    by_name = {op.name: op for op in report.ops}
    assert set(by_name) == {"proj", *VECTOR_RUNS}
    for name in VECTOR_RUNS:
        op = by_name[name]
        assert op.status == "pass", (name, op.reason)
        assert op.mismatches == 0 and op.total_cycles_match and op.cycles_total_rtl > 0
        assert op.cycles_rtl == op.cycles_model == 0  # the array idles: the unit's cycles are in the total
    assert by_name["vector/ln"].gemm == {"m": 4, "k": 0, "n": 40, "batch": 1}  # four rows of 40
    assert by_name["vector/pool"].gemm == {"m": 9, "k": 0, "n": 10, "batch": 1}  # 3x3 pooled pixels of 10
    assert by_name["vector/rope"].gemm == {"m": 6, "k": 0, "n": 8, "batch": 1}  # 2 positions x 3 heads of 8
    host = [note for note in report.notes if "host work" in note]
    assert host == ["vector op odd_rope: host work, not simulated (rope: half the head size (4 / 2) is not whole "
                    "words of 4 lanes)"], report.notes
    data = json.loads(json.dumps(report.to_dict()))  # what --json prints
    assert [op["name"] for op in data["ops"]][1:] == list(VECTOR_RUNS)


def test_a_design_without_the_unit_runs_only_the_matrix_ops(sim_cache):
    report = simulate(load_design("tiny"), VECTOR_KINDS, simulator="icarus", work_dir=sim_cache)
    assert [op.name for op in report.ops] == ["proj"]
    assert report.ops[0].status == "pass"


def test_a_gemm_gelu_gemm_network_runs_from_one_program(sim_cache):
    """The matrix ops chain and the GELU sits on their link: one program, no host step between the
    ops, the network's output bit-exact and its total cycles the walk's."""
    rq = REQUANT
    wl = Workload(name="net", ops=(Gemm(m=6, k=12, n=8, name="up", requant=rq),
                                   Gemm(m=6, k=8, n=4, name="down", requant=rq)),
                  vector_ops=(vector_op("gelu", (6, 8), io.GELU_PARAMS, name="act"),), vector_counts=(1,),
                  vector_after=(1,))
    report = simulate(TINY, wl, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass", op.reason
    assert op.mismatches == 0 and op.total_cycles_match
    assert op.gemm == {"m": 6, "k": 12, "n": 4, "batch": 1}
    assert report.network is not None and report.network["final_output"]["match"]
    assert any(note.startswith("one program for the whole network") for note in report.notes), report.notes


def test_a_residual_block_runs_from_one_program_with_its_skip_on_chip(sim_cache):
    """x -> up -> GELU -> down -> add(x): the add after the last GEMM takes the block's input, held
    in the ifmap while both GEMMs run; one program, the block's output bit-exact."""
    report = simulate(TINY, RESIDUAL_BLOCK, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass", op.reason
    assert op.mismatches == 0 and op.total_cycles_match
    assert op.gemm == {"m": 6, "k": 8, "n": 8, "batch": 1}
    assert any(note.startswith("one program for the whole network") and "gelu, add" in note
               for note in report.notes), report.notes


def test_two_residual_blocks_with_layernorm_run_from_one_program(sim_cache):
    """x -> attn -> add(x) -> LayerNorm -> ffn -> add(h) -> LayerNorm (an encoder layer's links, 6
    channels on 4 lanes): several ops after one GEMM run in order, the norms per token; one program."""
    rq = REQUANT
    add = vector_op("add", (6, 6), io.add_params(1 / 16, 1 / 16, 1 / 16), name="residual")
    norm = vector_op("layernorm", (6, 6), io.norm_params(6, 1e-5), axis=1, name="ln")
    wl = Workload(name="layer", ops=(Gemm(m=6, k=6, n=6, name="attn", requant=rq),
                                     Gemm(m=6, k=6, n=6, name="ffn", requant=rq)),
                  vector_ops=(add, norm, add, norm), vector_counts=(1, 1, 1, 1), vector_after=(1, 1, 2, 2))
    report = simulate(TINY, wl, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass", op.reason
    assert op.mismatches == 0 and op.total_cycles_match
    assert any("add, layernorm, add, layernorm" in note for note in report.notes), report.notes


def _small_cnn() -> Workload:
    """A CNN in ResNet's pattern on 8x8x3: stem conv (ReLU in its output stage) -> 3x3/2 max pool ->
    a basic block (conv, conv, residual add of the pooled map, ReLU) -> global average pool ->
    classifier GEMM."""
    from workloads.ops import Conv2d, Requant

    rq = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)
    relu_rq = dataclasses.replace(rq, act_min=0)

    def conv(c_in: int, hw: int, name: str, requant: Requant = relu_rq) -> Conv2d:
        return Conv2d(n=1, h=hw, w=hw, c_in=c_in, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1, requant=requant, name=name)

    def pool(kind: str, shape: tuple[int, ...], window: int, stride: int, pad: int, name: str) -> VectorOp:
        return vector_op(kind, shape, {"window_h": window, "window_w": window, "stride_h": stride, "stride_w": stride,
                                       "pad_h": pad, "pad_w": pad}, name=name)

    return Workload(
        name="cnn", ops=(conv(3, 8, "stem"), conv(4, 4, "block.conv1"), conv(4, 4, "block.conv2", rq),
                         Gemm(m=1, k=4, n=8, name="fc", requant=rq)),
        vector_ops=(pool("maxpool", (1, 8, 8, 4), 3, 2, 1, "pool"),
                    vector_op("add", (1, 4, 4, 4), io.add_params(1 / 16, 1 / 32, 1 / 16), name="add"),
                    vector_op("relu", (1, 4, 4, 4), {}, name="relu"), pool("avgpool", (1, 4, 4, 4), 4, 1, 0, "gap")),
        vector_counts=(1, 1, 1, 1), vector_after=(1, 3, 3, 3))


def test_a_whole_cnn_runs_from_one_program_with_its_pools_and_residual_on_chip(sim_cache):
    """Every conv, the pools, the residual add and its ReLU, and the classifier (a 1x1 conv over the
    pooled 1x1 map) from one program with no host step: the network's output bit-exact against the
    chain of JAX references (lax convs, the output stage, workloads._int_ops), total cycles == walk."""
    wl = _small_cnn()
    report = simulate(TINY, wl, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    assert [op.name for op in report.ops] == ["network"]
    (net,) = report.ops
    assert net.status == "pass" and net.mismatches == 0 and net.total_cycles_match, net.reason
    assert net.gemm["n"] == 8  # the classifier's outputs are the network's
    figures = perf_model.evaluate(TINY, wl).network  # evaluate's one-program figure is the RTL's total
    assert figures is not None and figures["total_cycles"] == net.cycles_total_rtl and figures["convs"] == 4
    assert any(n.startswith("one program for the whole network: 4 convs and 4 vector op(s)") for n in report.notes)
    # a stuck high product bit in one PE (a low one can vanish in the requantising shifts and the pools)
    bad = simulate(TINY, wl, simulator="icarus", work_dir=sim_cache, fault=rtl_gen.Fault(1, 2, 14, 1))
    assert bad.ops[0].status == "fail" and bad.ops[0].mismatches > 0
    per_op = simulate(TINY, wl, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache, reuse=False)  # the per-op path
    assert [op.name for op in per_op.ops] == ["stem", "block.conv1", "block.conv2", "fc", "vector/pool",
                                              "vector/add", "vector/relu", "vector/gap"]


def test_a_networks_stem_runs_over_the_space_to_depth_input_the_host_writes(sim_cache):
    """The network's input comes from the host, which writes it in the layout of the stem's fastest
    form: a 7x7 stride-2 stem on one channel runs over its space-to-depth input (half the cycles of
    its windows on the raw image here), its output MOVEd on chip into the next conv. The output is
    bit-exact against lax on the original input and weights, and the RTL total is evaluate's figure."""
    from perf_model.compiler.conv_network import compile_conv_network
    from perf_model.compiler.conv_workload import conv_network_spec
    from workloads.ops import Conv2d, Requant

    rq = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)
    stem = Conv2d(n=1, h=12, w=12, c_in=1, c_out=4, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3,
                  requant=dataclasses.replace(rq, act_min=0), name="stem")
    conv = Conv2d(n=1, h=6, w=6, c_in=4, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1, requant=rq, name="conv",
                  a_from_previous=True)
    wl = Workload(name="s2d-stem", ops=(stem, conv), counts=(1, 1))
    spec = conv_network_spec(wl)
    raw = compile_conv_network(TINY, spec.convs, spec.links, spec.skips, inputs=spec.inputs)
    formed = compile_conv_network(TINY, spec.convs, spec.links, spec.skips, inputs=spec.inputs, input_form=True)
    assert raw.input_steps == () and formed.input_steps == ("s2d",) and formed.on_chip
    walk = perf_model.gemm_program_cycles(TINY, formed).total
    assert walk < perf_model.gemm_program_cycles(TINY, raw).total  # the form is worth it: the test can fail
    figures = perf_model.evaluate(TINY, wl).network
    assert figures is not None and figures["total_cycles"] == walk
    report = simulate(TINY, wl, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (net,) = report.ops
    assert net.name == "network" and net.status == "pass" and net.mismatches == 0, net.reason
    assert net.total_cycles_match and net.cycles_total_rtl == walk
