"""The vector work in the model: the cycle contract, evaluate and evaluate_designs agreeing, host
work named with its reason, a row that does not fit the buffer, and a workload without vector ops."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import perf_model
from accel_dse.design_files import load_design
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from perf_model.vector_timing import vector_cycles, vector_plan
from workloads import Gemm, VectorOp, Workload

LN = VectorOp(kind="layernorm", shape=(1, 64, 768), axis=2, name="ln",
              params=(("rsqrt_const", 28378), ("rsqrt_bits", 10), ("eps", 32212)))
GELU = VectorOp(kind="gelu", shape=(1, 64, 3072), params=(("in_mult", 724), ("clip", 28983), ("poly_a", 9463)))
SOFTMAX = VectorOp(kind="softmax", shape=(1, 12, 64, 64), axis=3,
                   params=(("in_mult", 512), ("ln2", 45426), ("poly_b", 88670), ("poly_a", 11747), ("poly_c", 5636),
                           ("causal_offset", 3)))
ROPE = VectorOp(kind="rope", shape=(1, 1, 32, 128), params=(("start", 5), ("theta", 10000)))
ODD_ROPE = VectorOp(kind="rope", shape=(1, 2, 4, 24), params=(("start", 5), ("theta", 10000)))  # half: 12


def test_cycle_contract_by_hand():
    """``1 + rows * (passes * (words + 2) + scalar)``, worked by hand from docs/workloads.md."""
    # LayerNorm, 64 rows of 768 on 16 lanes: 48 words, three passes, MEAN 34 and RSQRT 52 a row
    assert vector_cycles(LN, 16) == 1 + 64 * (3 * (48 + 2) + 34 + 52)
    # GELU, one row of 64 * 3072 / 16 words, one pass
    assert vector_cycles(GELU, 16) == 1 + 12288 + 2
    # softmax, 12 * 64 rows of 64 on 8 lanes: three passes of 8 words and RECIP 34 a row
    assert vector_cycles(SOFTMAX, 8) == 1 + 768 * (3 * (8 + 2) + 34)
    plan = vector_plan(SOFTMAX, 8)
    assert not isinstance(plan, str) and plan.qrows == 64  # the mask's query period
    # RoPE, one token of 32 heads of 128 on 16 lanes: 32 rows of 8 words, 2 * 8 reads a row (x
    # words with the table's cos words, then its sin words), 2 + 1 cycles to the row's last write
    assert vector_cycles(ROPE, 16) == 1 + 32 * (16 + 2 + 1) == 609
    plan = vector_plan(ROPE, 16)
    assert not isinstance(plan, str) and (plan.qrows, plan.table_words, plan.table_rows) == (32, 16, 1)
    assert vector_cycles(ODD_ROPE, 16) is None and vector_cycles(ODD_ROPE, 4) == 1 + 8 * (12 + 3)


def _workload() -> Workload:
    gemm = Gemm(m=64, k=768, n=768, name="proj")
    return Workload(name="w", ops=(gemm, gemm), vector_ops=(LN, GELU, ROPE, ODD_ROPE), vector_counts=(2, 1, 3, 1),
                    vector_after=(1, 1, 2, 2))


def test_evaluate_charges_the_vector_ops():
    config = load_design("edge")  # with its vector unit
    bare = dataclasses.replace(config, vector_unit=False)
    w = _workload()
    plain = perf_model.evaluate(config, Workload(name="w", ops=w.ops))
    r = perf_model.evaluate(config, w)
    assert r.status == "ok"
    # the unit's busy cycles: each op's own program's VECTOR commands (GELU's 12,288 words run in chunks
    # of the ifmap, each chunk a run of its own: one more cycle and its pass tail a chunk)
    from perf_model.compiler.vector_chunks import vector_op_program
    from perf_model.program_timing import dram_rate, gemm_program_cycles

    def unit(op: VectorOp) -> int:
        return gemm_program_cycles(config, vector_op_program(config, op), rate=dram_rate(config)).vector

    busy = 2 * unit(LN) + unit(GELU) + 3 * unit(ROPE)
    assert unit(LN) == vector_cycles(LN, config.cols) and unit(ROPE) == 609  # whole: one run each
    assert unit(GELU) > vector_cycles(GELU, config.cols)
    assert r.total["vector_cycles"] == busy
    assert r.total["compute_cycles"] == plain.total["compute_cycles"]
    assert r.total["total_cycles"] >= plain.total["total_cycles"] + busy
    assert r.total["area_mm2"] == plain.total["area_mm2"]  # the unit's area: the design's, whatever it runs
    assert r.total["energy_pj"] > plain.total["energy_pj"]
    # a RoPE reads its input and its table (one position: 128 cos and 128 sin, 16 bits each) once
    rope_bytes = ROPE.elements + 2 * 2 * 64
    assert r.total["dram_read_bytes"] == plain.total["dram_read_bytes"] + 2 * LN.elements + GELU.elements \
        + 3 * rope_bytes
    assert [v["kind"] for v in r.vector_ops] == ["layernorm", "gelu", "rope"]
    assert r.vector_ops[2]["sram_read_bytes"] == 3 * 3 * ROPE.elements  # 3 runs: x once, a table row (2 x) a row
    assert r.host_work == [{"kind": "rope", "name": "", "runs": 1, "elements": ODD_ROPE.elements,
                            "reason": "rope: half the head size (24 / 2) is not whole words of 16 lanes"}]
    assert plain.total["vector_cycles"] == 0 and plain.vector_ops == [] and plain.host_work == []
    assert plain.total["energy_breakdown"]["vector"] == 0
    # without the unit: no vector cycles, no unit area, every vector op named as host work
    none = perf_model.evaluate(bare, w)
    assert none.total["vector_cycles"] == 0 and none.vector_ops == []
    assert none.total["area_mm2"] == perf_model.evaluate(bare, Workload(name="w", ops=w.ops)).total["area_mm2"]
    assert [(h["kind"], h["runs"], h["elements"]) for h in none.host_work] == [
        ("layernorm", 2, 2 * LN.elements), ("gelu", 1, GELU.elements), ("rope", 3, 3 * ROPE.elements),
        ("rope", 1, ODD_ROPE.elements)]
    assert "no vector unit" in none.host_work[0]["reason"]
    # the unit's area is charged on a design that carries it, whatever the workload
    assert plain.total["area_mm2"] > none.total["area_mm2"]


def test_evaluate_designs_agrees_with_evaluate():
    w = _workload()
    configs = [dataclasses.replace(load_design("edge"), vector_unit=True),
               ArrayConfig(rows=8, cols=8, vector_unit=True),
               ArrayConfig(rows=32, cols=16, tech_nm=7, vector_unit=True)]
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs(configs), w)
    for i, config in enumerate(configs):
        r = perf_model.evaluate(config, w)
        assert int(table.vector_cycles[i]) == r.total["vector_cycles"] > 0
        for key in ("total_cycles", "energy_pj", "area_mm2", "latency_s", "dram_read_bytes"):
            assert math.isclose(float(getattr(table, key)[i]), r.total[key], rel_tol=1e-12), key
        assert math.isclose(float(table.energy_breakdown["leakage"][i]), r.total["energy_breakdown"]["leakage"],
                            rel_tol=1e-12)
    # fewer lanes, more vector cycles
    assert table.vector_cycles[1] > table.vector_cycles[0]


def test_a_row_that_does_not_fit_is_infeasible():
    config = ArrayConfig(rows=16, cols=16, ifmap_sram_kib=1, vector_unit=True)
    r = perf_model.evaluate(config, _workload())
    assert r.status == "infeasible"
    assert r.reason == ("vector op layernorm ln: a row of 768 elements needs 1536 bytes of ifmap buffer, "
                        "the design has 1024")
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs([config]), _workload())
    assert not table.feasible[0] and table.reason[0] == r.reason and table.energy_pj[0] == 0


@pytest.mark.parametrize("spec", ["bert_base:seq=64", "llama_decode:kv=64,d=256,heads=4,ffn=512"])
def test_builtins_leave_no_host_work(spec):
    import workloads

    r = perf_model.evaluate(dataclasses.replace(load_design("edge"), vector_unit=True), workloads.resolve(spec))
    assert r.status == "ok" and r.total["vector_cycles"] > 0
    assert r.host_work == []  # RoPE too: on the unit
    assert np.isfinite(r.total["energy_pj"])


def test_the_sweep_can_search_the_vector_unit():
    """A space may name ``vector_unit`` as a choice; the vectorised model prices both values: the
    unit's cycles and area where it is, host work (no cycles, no area) where it is not."""
    import workloads
    from accel_dse.search.space.space_file import parse_space

    space = parse_space({"name": "v", "objectives": ["edp"], "workloads": [{"spec": "bert_base:seq=16"}],
                         "params": {"rows": 8, "cols": 8, "vector_unit": [True, False]}})
    assert [p.field for p in space.free_params] == ["vector_unit"]
    d = perf_model.DesignArrays.from_columns(rows=8, cols=8, vector_unit=np.array([True, False]))
    table = perf_model.evaluate_designs(d, workloads.resolve("bert_base:seq=16"))
    assert table.vector_cycles[0] > 0 and table.vector_cycles[1] == 0
    assert table.area_mm2[0] > table.area_mm2[1]
    with pytest.raises(ModelError, match="vector_unit"):
        perf_model.DesignArrays.from_columns(rows=8, cols=8, input_bits=16, acc_bits=32, vector_unit=True)


def test_an_op_longer_than_one_run_is_split_into_runs_the_walk_sums():
    """LLaMA's causal softmax of 32 heads x 2,048 queries (65,536 rows, one past a run's 65,535) runs as
    two VECTOR commands, the first of 31 whole query periods (63,488 rows), so each run starts on a
    query 0; a gated SiLU of 2,048 x 11,008 (22.5 M elements, past a row's 2**24) runs as a row per
    token. The commands' cycles under the unit's contract sum to the model's."""
    from accel_spec.isa import Opcode
    from accel_spec.vector_isa import VECTOR_CODES
    from perf_model.compiler.vector import vector_commands, vector_registers
    from perf_model.vector_timing import plan_cycles, vector_plan, vector_run_cycles
    from workloads import _int_ops as io
    from workloads.vector_ops import VectorOp

    soft = VectorOp(kind="softmax", shape=(1, 32, 2048, 2048), axis=3,
                    params=tuple(io.softmax_params(0.125, 0).items()))
    plan = vector_plan(soft, 16)
    assert not isinstance(plan, str)
    assert (plan.rows, plan.runs, plan.run_spans()) == (65536, 2, [(0, 63488), (63488, 2048)])
    assert 63488 % 2048 == 0
    cmds = vector_commands(vector_registers(soft, 16, src=0, src2=0, dst=0))
    heads = [c for c in cmds if c.opcode == Opcode.VECTOR]
    assert {c["vkind"] for c in heads} == {VECTOR_CODES["softmax"]}
    assert [c["vrows"] for c in heads] == [63488, 2048] and heads[1]["vsrc"] == 63488 * 128
    assert sum(vector_run_cycles(c["vkind"], c["vrows"], c["vwords"]) for c in heads) == plan_cycles(plan)
    silu = VectorOp(kind="silu", shape=(1, 2048, 11008), params=(("gated", 1),))
    plan = vector_plan(silu, 16)
    assert not isinstance(plan, str)
    assert (plan.rows, plan.n, plan.words, plan.runs) == (2048, 11008, 688, 1)
    assert plan_cycles(plan) == 1 + 2048 * (688 + 2)


def test_unit_area_fit_reproduces_its_yosys_points():
    """The quadratic area fit (``bench/vector_unit_area.py``) at its measured points, its square term
    at least the transpose tile's flops (8 bits a lane squared, NanGate DFF_X1 4.522 µm² each)."""
    from perf_model.physical import vector_unit_fit as fit
    from perf_model.physical.vector_unit import unit_um2

    assert len(fit.POINTS) >= 4  # one more than the fit's terms
    for lanes, area, _transistors, _flops in fit.POINTS:
        assert float(unit_um2(lanes)) == pytest.approx(area, rel=0.002)  # the fit within 0.2 % of each point
    assert fit.PER_LANE2_UM2 >= 8 * 4.522
