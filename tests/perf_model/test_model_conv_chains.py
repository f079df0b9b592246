"""Chains of convolutions kept on chip in the model (``perf_model.evaluator.conv_ops``, the chain
scorer ``perf_model.compiler.conv_chain_score``): which links count as a chain, when the model keeps
one, and that the sweep's vectorised path scores it as ``evaluate`` does. That the kept chain's
cycles are the RTL's is ``tests/rtl_gen/test_rtl_conv_network.py``'s."""

from __future__ import annotations

import dataclasses

import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.errors import ModelError
from perf_model.arrays.ops import op_arrays
from perf_model.compiler.conv_network import compile_conv_network
from perf_model.evaluator.conv_ops import TIE
from perf_model.program_timing import dram_rate, gemm_program_cycles
from workloads.ops import Conv2d, Requant, Workload

RQ = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)
TINY = load_design("tiny")


def _chain(channels: int, count: int = 2, hw: int = 6) -> Workload:
    first = Conv2d(n=1, h=hw, w=hw, c_in=channels, c_out=channels, kh=3, kw=3, pad_h=1, pad_w=1, requant=RQ,
                   name="c0")
    ops = [first] + [dataclasses.replace(first, name=f"c{i}", a_from_previous=True) for i in range(1, count)]
    return Workload(name="chain", ops=tuple(ops), counts=(1,) * count)


def test_resnet18s_chains_are_its_basic_blocks_conv1_to_conv2():
    """The tracer's data flow and the shapes make a chain link of each block's conv1 -> conv2, and of
    nothing else: not the stem, a downsample, a block's last conv (an add follows) or the fc."""
    ops = op_arrays(workloads.resolve("resnet18:res=32"))
    linked = [ops.names[i] for i in range(len(ops)) if ops.conv_link[i]]
    assert linked == [f"layer{s}.{b}.conv1" for s in range(1, 5) for b in range(2)]
    assert not (ops.link & ops.conv_link).any()  # a 1x1 chain is a GEMM link, never both


def test_a_three_conv_chain_is_one_program_with_both_links_on_chip():
    wl = _chain(4, count=3)
    kept, alone = perf_model.evaluate(TINY, wl), perf_model.evaluate(TINY, wl, reuse=False)
    assert [o.on_chip for o in kept.ops] == ["out", "in,out", "in"]
    program = compile_conv_network(TINY, wl.ops, [None, None])
    walk = gemm_program_cycles(TINY, program, rate=dram_rate(TINY))
    assert program.on_chip and kept.total["total_cycles"] == walk.total
    assert kept.total["compute_cycles"] == walk.compute == alone.total["compute_cycles"]
    assert kept.total["dram_write_bytes"] < alone.total["dram_write_bytes"]


def test_a_chain_slower_than_its_convs_alone_is_not_kept():
    """tpu-v1's 64-channel layer1 pair: alone, each conv packs four taps a word of its 256 rows; in
    the chain the second conv reads the first one's output in the ifmap, one tap a word, and the one
    program is slower beyond the tie, so each conv keeps its own."""
    tpu = load_design("tpu-v1")
    ops = {op.name: op for op in workloads.resolve("resnet18:res=112").ops}
    pair = (ops["layer1.0.conv1"], ops["layer1.0.conv2"])
    wl = Workload(name="pair", ops=pair, counts=(1, 1))
    program = compile_conv_network(tpu, pair, [None])
    chained = gemm_program_cycles(tpu, program, rate=dram_rate(tpu)).total
    kept, alone = perf_model.evaluate(tpu, wl), perf_model.evaluate(tpu, wl, reuse=False)
    assert [o.conv_path for o in alone.ops] == ["chip", "chip"]
    assert program.on_chip and chained > alone.total["total_cycles"] * (1 + TIE)
    assert [o.on_chip for o in kept.ops] == ["", ""]
    assert kept.total["total_cycles"] == alone.total["total_cycles"]


def test_a_chain_faster_than_the_hosts_gemms_is_kept_on_chip():
    """Two channels of 5x5 pixels on 4 rows: alone, each conv is faster as the host's im2col GEMM
    than with windows on chip; as one program with its link on chip the pair beats both GEMMs."""
    wl = _chain(2, hw=5)
    alone, kept = perf_model.evaluate(TINY, wl, reuse=False), perf_model.evaluate(TINY, wl)
    program = compile_conv_network(TINY, wl.ops, [None])
    assert [o.conv_path for o in alone.ops] == ["host", "host"]
    assert [o.conv_path for o in kept.ops] == ["chip", "chip"] and [o.on_chip for o in kept.ops] == ["out", "in"]
    assert kept.total["total_cycles"] == gemm_program_cycles(TINY, program, rate=dram_rate(TINY)).total
    assert kept.total["total_cycles"] < alone.total["total_cycles"]


def test_a_chain_too_large_for_the_ifmap_is_not_kept_and_not_compiled_through_dram():
    """A 64x64x4 pair on ``tiny``: the intermediate needs 4096 ifmap words of its 1024. The compiler
    alone falls back to the links through DRAM; the chain scorer's ``require_on_chip`` refuses with
    the reason instead, and ``evaluate`` keeps each conv apart."""
    wl = _chain(4, hw=64)
    assert not compile_conv_network(TINY, wl.ops, [None]).on_chip
    with pytest.raises(ModelError, match=r"^the links cannot stay on chip: x1 needs 4096 ifmap words"):
        compile_conv_network(TINY, wl.ops, [None], require_on_chip=True)
    kept, alone = perf_model.evaluate(TINY, wl), perf_model.evaluate(TINY, wl, reuse=False)
    assert [o.on_chip for o in kept.ops] == ["", ""]
    assert kept.total["total_cycles"] == alone.total["total_cycles"]


@pytest.mark.parametrize(("change", "why"), [({"dataflow": "os"}, "output stationary builds no windows"),
                                             ({"cols": 8}, "R != C: an output word is no ifmap word")])
def test_designs_that_cannot_move_an_output_keep_no_chain(change, why):
    design = dataclasses.replace(TINY, **change)
    result = perf_model.evaluate(design, _chain(4))
    assert [o.on_chip for o in result.ops] == ["", ""], why


def test_the_sweep_scores_a_chain_as_evaluate_does():
    """``evaluate_designs`` (the sweep's path, several designs at once) gives each design the totals
    ``evaluate`` gives it: the chain kept on the design that can, not on the others."""
    wl = _chain(4)
    designs = [TINY, dataclasses.replace(TINY, cols=8), dataclasses.replace(TINY, dram_bytes_per_cycle=2.0)]
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs(designs), wl)
    for i, design in enumerate(designs):
        one = perf_model.evaluate(design, wl)
        assert table.total_cycles[i] == one.total["total_cycles"], design
        assert table.dram_read_bytes[i] + table.dram_write_bytes[i] == (
            one.total["dram_read_bytes"] + one.total["dram_write_bytes"]), design
