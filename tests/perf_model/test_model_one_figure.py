"""One figure per design and workload (``perf_model.figures.one_program``): what the sweep records,
``evaluate``'s headline and the program walk are one number, on random designs and networks.

The reference is the compiler's own program, walked (``perf_model.compiler.network_figures``,
called directly here, not through the cache the model keeps), where the design runs the workload
as one program; the op-by-op programs (the per-op rows, summed, and the vector unit's work)
where it does not."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_dse.search.scoring.evaluator import ModelEvaluator
from accel_spec.config import ArrayConfig
from perf_model.compiler.network_figures import network_figures

#: Small versions of the networks the sweep scores: a CNN with residual links, one with
#: depthwise convs, an encoder layer and a decoder step.
NETWORKS = ("resnet18:res=32", "mobilenet_v2:res=32", "bert_base:seq=16,d=64,heads=2,ffn=128",
            "llama_decode:kv=16,d=64,heads=2,ffn=128")


def _random_designs(seed: int, n: int) -> list[ArrayConfig]:
    """``n`` designs around ``tiny``: every dataflow, with and without the vector unit, single and
    double buffered, buffers from too small to roomy."""
    rng = np.random.default_rng(seed)
    base = load_design("tiny")
    out = []
    for i in range(n):
        size = int(rng.choice([4, 8, 16]))
        out.append(dataclasses.replace(
            base, rows=size, cols=int(rng.choice([size, 2 * size])) if i % 4 else size,
            dataflow=("ws", "os", "is")[i % 3], vector_unit=bool(i % 2 == 0 or i % 7 == 0),
            double_buffered=bool((i // 2) % 2), ifmap_sram_kib=int(rng.choice([8, 32, 128])),
            weight_sram_kib=int(rng.choice([4, 16, 64])), ofmap_sram_kib=int(rng.choice([8, 32, 128])),
            dram_bytes_per_cycle=float(rng.choice([2.0, 4.0, 16.0]))))
    return out


@pytest.mark.parametrize("spec", NETWORKS)
def test_recorded_figure_is_the_program_walk(spec):
    wl = workloads.resolve(spec)
    designs = _random_designs(len(spec), 12)
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs(designs), wl)
    recorded = ModelEvaluator([(spec, 1.0, wl)]).evaluate_columns(
        {f.name: np.array([getattr(d, f.name).value if f.name == "dataflow" else getattr(d, f.name) for d in designs])
         for f in dataclasses.fields(ArrayConfig)})
    kinds = set()
    for i, config in enumerate(designs):
        result = perf_model.evaluate(config, wl)
        assert bool(table.feasible[i]) == (result.status == "ok")
        if not table.feasible[i]:
            kinds.add("infeasible")
            continue
        walk = network_figures(config, wl)
        headline = result.total["total_cycles"]
        if walk is not None and "total_cycles" in walk:
            kinds.add("one program")
            assert table.total_cycles[i] == walk["total_cycles"] == headline, config.short_name()
            assert table.compute_cycles[i] == walk["compute_cycles"]
            assert table.vector_cycles[i] == walk["vector_cycles"]
            assert table.dram_read_bytes[i] == walk["dram_read_bytes"]
            assert table.dram_write_bytes[i] == walk["dram_write_bytes"]
            assert table.energy_breakdown["dram"][i] == pytest.approx(
                (walk["dram_read_bytes"] + walk["dram_write_bytes"]) * _pj_per_byte(config), rel=1e-12)
            assert table.energy_breakdown["vector_dram"][i] == 0.0
            assert result.network == walk
        else:
            kinds.add("op by op")
            per_op = sum(op.total_cycles for op in result.ops)
            vector = sum(v["total_cycles"] for v in result.vector_ops)
            assert table.total_cycles[i] == headline >= per_op + vector
            assert headline - per_op - vector == pytest.approx(table.stall_cycles[i] - sum(
                op.stall_cycles for op in result.ops), abs=1e-6)
        assert table.latency_s[i] == pytest.approx(table.total_cycles[i] / (config.clock_mhz * 1e6), rel=1e-12)
        assert table.edp[i] == pytest.approx(table.energy_pj[i] * 1e-12 * table.latency_s[i], rel=1e-12)
        assert recorded.metrics["total_cycles"][i] == table.total_cycles[i]
        assert recorded.metrics["edp"][i] == table.edp[i]
    assert {"one program", "op by op"} <= kinds, kinds


def _pj_per_byte(config: ArrayConfig) -> float:
    """DRAM pJ per byte of ``config``'s memory part (0 for ``"none"``, ideal memory)."""
    from accel_spec.config import MEMORY_KINDS

    return 0.0 if config.dram == "none" else 8.0 * MEMORY_KINDS[config.dram].pj_per_bit


def test_the_one_programs_dram_bytes_are_its_own_transfers():
    """Counted by hand: a conv reads its int8 NHWC image and its weights once and writes its output
    (one band, 8 channels = one word); two chained convs keep the link on chip (the second conv's
    weights are read, the intermediate tensor is never stored); the energy is those bytes' (the
    per-op plans' DRAM energy is not what is recorded)."""
    from workloads.ops import Conv2d, Requant, Workload

    q = Requant(multiplier=(1 << 30,), shift=(0,))
    convs = [Conv2d(n=1, h=8, w=8, c_in=8, c_out=8, kh=3, kw=3, pad_h=1, pad_w=1, requant=q, name=f"c{i}")
             for i in range(2)]
    config = dataclasses.replace(load_design("tiny"), rows=8, cols=8, dataflow="ws", vector_unit=True,
                                 ifmap_sram_kib=64, weight_sram_kib=64, ofmap_sram_kib=64)
    image, weights = 8 * 8 * 8, 8 * 3 * 3 * 8
    for n in (1, 2):
        wl = Workload(name="chain", ops=tuple(convs[:n]), counts=(1,) * n)
        walk = network_figures(config, wl)
        assert walk is not None and walk["links_on_chip"]
        assert (walk["dram_read_bytes"], walk["dram_write_bytes"]) == (image + n * weights, image)
        table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs([config]), wl)
        assert table.dram_read_bytes[0] + table.dram_write_bytes[0] == 2 * image + n * weights
        assert table.energy_breakdown["dram"][0] == pytest.approx((2 * image + n * weights) * _pj_per_byte(config))


def test_the_one_programs_leakage_scales_with_its_walk():
    """Leakage is the design's leakage power over the run: the one program's latency, not the per-op sum's."""
    wl = workloads.resolve(NETWORKS[0])
    config = dataclasses.replace(load_design("tiny"), vector_unit=True, ifmap_sram_kib=32, ofmap_sram_kib=32)
    result = perf_model.evaluate(config, wl)
    assert result.network is not None and "total_cycles" in result.network
    per_op_latency = sum(op.latency_s for op in result.ops) + sum(
        v["total_cycles"] for v in result.vector_ops) / (config.clock_mhz * 1e6)
    per_op_leakage = sum(op.energy_breakdown["leakage"] for op in result.ops)
    walk_latency = result.network["total_cycles"] / (config.clock_mhz * 1e6)
    assert result.total["latency_s"] == pytest.approx(walk_latency, rel=1e-12)
    assert per_op_latency != pytest.approx(walk_latency, rel=1e-3)  # the two differ here: the test can fail
    assert result.total["energy_breakdown"]["leakage"] > per_op_leakage * walk_latency / per_op_latency * 0.99



def test_the_one_programs_power_split_follows_its_walk():
    """On-die and DRAM power and the power density are the walk's energy over the walk's latency:
    the two powers add up to ``power_w``, and the density is the on-die power over the area."""
    wl = workloads.resolve(NETWORKS[0])
    config = dataclasses.replace(load_design("tiny"), vector_unit=True, ifmap_sram_kib=32, ofmap_sram_kib=32)
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs([config]), wl)
    walk_latency = perf_model.evaluate(config, wl).network["total_cycles"] / (config.clock_mhz * 1e6)
    assert table.latency_s[0] == pytest.approx(walk_latency, rel=1e-12)
    assert table.power_w[0] == pytest.approx(table.energy_pj[0] * 1e-12 / walk_latency, rel=1e-12)
    assert table.on_die_power_w[0] + table.dram_power_w[0] == pytest.approx(table.power_w[0], rel=1e-12)
    assert table.power_density_w_mm2[0] == pytest.approx(table.on_die_power_w[0] / table.area_mm2[0], rel=1e-12)

def test_designs_differing_in_clock_or_node_alone_share_one_walk_and_only_those():
    """The model walks a program once for designs that differ only in what reaches the program through
    the DRAM pacing (``one_program._program_key``); each still equals its own uncached walk. (The
    encoder layer: the key and the cache are the same for every network, and its walk is a tenth of
    a second where the CNN's takes one.)"""
    wl = workloads.resolve(NETWORKS[2])
    base = dataclasses.replace(load_design("tiny"), vector_unit=True, ifmap_sram_kib=32, ofmap_sram_kib=32)
    # a 16-byte bus on 12.8 GB/s: paced, and more slowly at a faster clock (12.8 vs 10.7 bytes a cycle)
    part = dataclasses.replace(base, rows=16, cols=16, dram="ddr3-1600-x64", dram_bytes_per_cycle=32.0)
    designs = [base, dataclasses.replace(base, clock_mhz=900.0, tech_nm=28), part,
               dataclasses.replace(part, clock_mhz=1200.0), dataclasses.replace(base, dram_bytes_per_cycle=1.0)]
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs(designs), wl)
    walks = [network_figures(d, wl)["total_cycles"] for d in designs]
    assert list(table.total_cycles) == walks
    assert walks[0] == walks[1] and walks[0] != walks[4]  # the clock alone: one program; the bus: another
    from perf_model.figures.one_program import _program_key

    assert _program_key(designs[0], wl) == _program_key(designs[1], wl)
    assert walks[2] != walks[3]  # the clock through the pacing: another walk, so the key must tell them apart
    assert _program_key(designs[2], wl) != _program_key(designs[3], wl)


def _per_op_sum(config: ArrayConfig, wl) -> float:
    """The per-op programs' sum (each op on its own plan, links on chip where the plans keep them,
    the vector unit's work after them): what the sweep recorded before the one figure."""
    from perf_model.arrays.ops import op_arrays
    from perf_model.compiler.scorers import COMPILER_SCORERS
    from perf_model.compiler.vector_walk import COMPILER_WALKS
    from perf_model.evaluator.design_ops import evaluate_block
    from perf_model.evaluator.vector_work import vector_columns, workload_vector_ops
    from perf_model.figures.design_table import totals
    from perf_model.physical.energy import DEFAULT_ENERGY
    from perf_model.physical.pe_area import area_coefficients

    designs = perf_model.DesignArrays.from_configs([config])
    block = evaluate_block(designs, op_arrays(wl), DEFAULT_ENERGY, area_coefficients(), reuse=True,
                           scorers=COMPILER_SCORERS)
    columns, _ = totals(block, designs.rows, designs.cols,
                        vector_columns(designs, workload_vector_ops(wl), DEFAULT_ENERGY, block.vdd,
                                       walks=COMPILER_WALKS))
    return float(columns["total_cycles"][0])


#: The designs (``_random_designs(len(spec) + 1, 12)``, by index) on which the one program is still
#: over its parts, with why (``docs/memory_system.md``, "The one program against its parts"). The
#: test fails when one of them is held (then it goes) or another case appears.
_NOT_HELD: dict[str, dict[int, str]] = {}  # none since a vector op's part is its own program's walk


@pytest.mark.parametrize("spec", NETWORKS)
def test_the_one_program_is_at_most_its_parts(spec):
    wl = workloads.resolve(spec)
    worse = {}
    for i, config in enumerate(_random_designs(len(spec) + 1, 12)):
        walk = network_figures(config, wl)
        if walk is None or "total_cycles" not in walk:
            continue
        parts = _per_op_sum(config, wl)
        if walk["total_cycles"] > parts:
            worse[i] = f"{config.short_name()}: {walk['total_cycles']:,} > {parts:,.0f}"
    assert set(worse) == set(_NOT_HELD.get(spec, {})), worse


def test_without_reuse_the_ops_run_as_their_own_programs():
    """``reuse=False`` (``evaluate --no-reuse``, ``simulate --no-reuse``): every op its own program, so the
    figure is the op-by-op programs', in ``evaluate`` and ``evaluate_designs`` alike."""
    wl = workloads.resolve(NETWORKS[0])
    config = dataclasses.replace(load_design("tiny"), vector_unit=True, ifmap_sram_kib=32, ofmap_sram_kib=32)
    walk = network_figures(config, wl)["total_cycles"]
    alone = perf_model.evaluate(config, wl, reuse=False)
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs([config]), wl, reuse=False)
    assert alone.total["total_cycles"] == table.total_cycles[0] != walk
    assert alone.total["total_cycles"] >= sum(op.total_cycles for op in alone.ops) + sum(
        v["total_cycles"] for v in alone.vector_ops)
    assert perf_model.evaluate(config, wl).total["total_cycles"] == walk


def test_a_program_laid_out_past_the_isas_fields_is_a_reason_not_a_traceback(monkeypatch):
    """A command field past its bits (a program whose tensors pass the 32-bit DRAM address space, found
    only as the compiler lays it out) is ``Command.make``'s ``FieldRangeError``; the one-program figure
    turns it into the reason the program cannot be built, and the per-op figures stay."""
    from accel_spec.isa import Command, FieldRangeError, Opcode
    from perf_model.compiler import blocks

    with pytest.raises(FieldRangeError, match="dram_addr must fit in 32 bits"):
        Command.make(Opcode.LOAD, buffer=0, dram_addr=1 << 32, rows=1, words=1)

    def too_far(config, block):
        return Command.make(Opcode.LOAD, buffer=0, dram_addr=(1 << 32) + 64, rows=1, words=1)

    monkeypatch.setattr(blocks, "compile_block", too_far)
    wl = workloads.resolve(NETWORKS[2])
    config = dataclasses.replace(load_design("tiny"), vector_unit=True, ifmap_sram_kib=32, ofmap_sram_kib=32)
    figures = network_figures(config, wl)
    assert figures is not None and "dram_addr must fit in 32 bits" in figures["reason"], figures


def test_a_full_size_layer_is_at_most_its_parts_and_its_transposes(monkeypatch):
    """A BERT-base encoder layer (seq 512) as one program, on random weight-stationary designs with the
    unit: without its keys' transposes (``K^T``, work no op of the per-op sum counts: the scores'
    per-op plan reads ``K^T`` as if it were in DRAM) it is at most its parts, its softmax in the chunks
    of the softmax's own program (in place, pipelined), its tail chain's DRAM links pipelined
    (``docs/memory_system.md``). The walk of a program without the transposes is a figure only: that
    program could not compute the scores."""
    from perf_model.compiler import dram_graph

    wl = workloads.resolve("bert_base")
    rng = np.random.default_rng(5)
    base = load_design("edge")
    checked = 0
    for _ in range(6):
        config = dataclasses.replace(
            base, rows=int(2 ** rng.integers(3, 8)), cols=int(2 ** rng.integers(3, 8)), dataflow="ws",
            vector_unit=True, double_buffered=bool(rng.random() < 0.5),
            ifmap_sram_kib=int(2 ** rng.integers(6, 12)), weight_sram_kib=int(2 ** rng.integers(5, 11)),
            ofmap_sram_kib=int(2 ** rng.integers(5, 11)), dram_bytes_per_cycle=float(rng.choice([4.0, 8.0, 16.0])))
        with monkeypatch.context() as m:
            m.setattr(dram_graph, "transpose_steps", lambda *a, **k: dram_graph.StepPart(lambda tensors: []))
            walk = network_figures(config, wl)
        if walk is None or "total_cycles" not in walk:
            continue
        parts = _per_op_sum(config, wl)
        assert walk["total_cycles"] <= parts, (config.short_name(), walk["total_cycles"], parts)
        assert network_figures(config, wl)["total_cycles"] > walk["total_cycles"]  # the transposes cost cycles
        checked += 1
    assert checked >= 4
