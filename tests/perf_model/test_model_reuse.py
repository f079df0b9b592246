"""On-chip reuse across layers in the model: the links it keeps are the compiler's, its cycles the
walk's of the chain's programs, its DRAM bytes those the programs move; the tracer finds links."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import Buffer, Opcode
from perf_model import program_timing
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import op_arrays
from perf_model.compiler.chain import compile_chain
from perf_model.compiler.program import compile_gemm
from perf_model.evaluator.design_ops import evaluate_block
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.physical.pe_area import area_coefficients
from workloads._layers import FORMS
from workloads._requant import recording, with_flow, with_requant
from workloads._tracer import trace
from workloads.ops import Gemm, Requant

RQ = Requant(multiplier=(1 << 30,), shift=(6,))


def _chain(m: int, dims: list[int]) -> list[Gemm]:
    return [Gemm(m=m, k=k, n=n, requant=RQ, a_from_previous=i > 0) for i, (k, n) in enumerate(zip(dims, dims[1:],
                                                                                                   strict=False))]


def _block(config: ArrayConfig, gemms: list[Gemm], reuse: bool = True):  # noqa: ANN202 - a Block
    return evaluate_block(DesignArrays.from_configs([config]), op_arrays([(g, 1) for g in gemms]), DEFAULT_ENERGY,
                          area_coefficients(), reuse=reuse, scorers=None)


def _random_cases(count: int, seed: int):  # noqa: ANN202 - (config, gemms) pairs
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        r = int(rng.choice([2, 4, 8, 16]))
        dataflow = str(rng.choice(["ws", "is"]))  # IS moves on any shape: its ifmap words have C lanes
        c = r if dataflow == "ws" else int(rng.choice([2, 3, 4, 8]))
        config = ArrayConfig(rows=r, cols=c, dataflow=dataflow, ifmap_sram_kib=int(rng.choice([2, 8, 32])),
                             weight_sram_kib=int(rng.choice([1, 2, 4])), ofmap_sram_kib=int(rng.choice([2, 4, 8])),
                             dram_bytes_per_cycle=float(rng.choice([2, 4, 8, 16])),
                             double_buffered=bool(rng.integers(2)), shadow_stationary=bool(rng.integers(2)))
        gemms = _chain(int(rng.integers(1, 120)), [int(rng.integers(1, 100)) for _ in range(int(rng.integers(3, 5)))])
        if _block(config, gemms, reuse=False).feasible.all():
            out.append((config, gemms))
    return out


def test_the_model_keeps_the_compilers_links_and_takes_the_walks_cycles():
    cases = _random_cases(40, seed=7)
    kept_any = exact = 0
    for config, gemms in cases:
        plan, programs = compile_chain(config, gemms, [True] * len(gemms))
        block = _block(config, gemms)
        kept = [r is not None for r in plan.regions]
        assert kept == [bool(x) for x in block.c_on_chip[0, :-1]], config
        assert [False, *kept] == [bool(x) for x in block.a_on_chip[0]]
        kept_any += any(kept)
        walk = np.array([program_timing.gemm_program_cycles(config, p).total for p in programs], dtype=np.float64)
        fast = block.total_cycles[0]
        exact += bool((fast == walk).all())
        # The fast model's bounded terms (page splits, queue-load boundaries) only make the walk slower.
        assert (fast <= walk).all() and (fast >= 0.99 * walk).all(), (config, walk, fast)
    assert kept_any >= 20, kept_any  # the cases exercise reuse
    assert exact >= 30, exact


@pytest.mark.parametrize("double", [True, False])
def test_a_kept_link_moves_no_bytes_through_dram_and_is_faster(double):
    config = ArrayConfig(rows=8, cols=8, dataflow="ws", ifmap_sram_kib=16, weight_sram_kib=8, ofmap_sram_kib=8,
                         dram_bytes_per_cycle=8, double_buffered=double)
    gemms = _chain(96, [40, 64, 48, 24])
    on, off = _block(config, gemms), _block(config, gemms, reuse=False)
    assert on.c_on_chip[0].tolist() == [True, True, False] and not off.c_on_chip.any()
    a_read = on.dram_read[:, 0, :].sum(axis=0)
    c_write = on.dram_write[:, 0, :].sum(axis=0)
    m, k, n = gemms[0].m, gemms[0].k, gemms[-1].n
    # The first op reads A (once: it fits the buffer) and the last writes C; the rest is weights.
    weights = [g.k * g.n for g in gemms]
    assert a_read.tolist() == [m * k + weights[0], weights[1], weights[2]]
    assert c_write.tolist() == [0, 0, m * n]
    assert on.total_cycles[0].sum() < off.total_cycles[0].sum()
    # The programs agree: no STORE where the model keeps C, no A LOAD where it finds A.
    plan, programs = compile_chain(config, gemms, [True] * 3)
    kinds = [{(c.opcode, c["buffer"]) for c in p.commands if c.opcode != Opcode.MOVE} for p in programs]
    assert (Opcode.STORE, Buffer.OFMAP) not in kinds[0] | kinds[1] and (Opcode.STORE, Buffer.OFMAP) in kinds[2]
    assert (Opcode.LOAD, Buffer.IFMAP) in kinds[0] and (Opcode.LOAD, Buffer.IFMAP) not in kinds[1] | kinds[2]


def test_a_design_that_cannot_move_keeps_every_link_in_dram():
    gemms = _chain(64, [32, 32, 32, 32])
    for config in (ArrayConfig(rows=8, cols=16, ifmap_sram_kib=64),  # WS with rows != cols
                   ArrayConfig(rows=8, cols=8, dataflow="os", ifmap_sram_kib=64),
                   ArrayConfig(rows=8, cols=8, ifmap_sram_kib=1)):  # the region needs more than half the ifmap
        block = _block(config, gemms)
        assert not block.c_on_chip.any() and not block.a_on_chip.any(), config
        plan, _ = compile_chain(config, gemms, [True] * 3)
        assert plan.regions == (None, None)


def test_input_stationary_keeps_links_on_any_shape():
    config = ArrayConfig(rows=8, cols=4, dataflow="is", ifmap_sram_kib=64)
    gemms = _chain(64, [32, 32, 32, 32])
    block = _block(config, gemms)
    plan, programs = compile_chain(config, gemms, [True] * 3)
    assert block.c_on_chip[0].tolist() == [True, True, False] and plan.regions[0] is not None
    walk = [program_timing.gemm_program_cycles(config, p).total for p in programs]
    assert block.total_cycles[0].tolist() == walk


def test_reuse_on_a_design_without_it_is_a_clear_error():
    with pytest.raises(ModelError, match="weight-stationary array with rows == cols, or an input-stationary one"):
        compile_gemm(ArrayConfig(rows=8, cols=8, dataflow="os"), Gemm(m=8, k=8, n=8), requant=True, c_region=0)
    with pytest.raises(ModelError, match="rows == cols"):
        compile_gemm(ArrayConfig(rows=8, cols=4), Gemm(m=8, k=8, n=8), requant=True, a_region=0)
    with pytest.raises(ModelError, match="only a requantised output can stay on chip"):
        compile_gemm(ArrayConfig(rows=8, cols=8), Gemm(m=8, k=8, n=8), c_region=0)


def test_the_tracer_links_a_dense_chain_but_not_through_an_activation_or_a_residual():
    form = FORMS["int8"]

    def net(x, w1, w2, w3, w4):
        h = form.dense(x, w1, "relu")  # the output stage's clamp: still the same array
        h = form.dense(h, w2)
        g = form.gelu(h)  # an activation the output stage does not compute
        g = form.dense(g, w3)
        return form.dense(form.add(g, g), w4)  # a residual add

    args = [jax.ShapeDtypeStruct((16, 32), jnp.int8)] + [jax.ShapeDtypeStruct((32, 32), jnp.int8)] * 4
    flow: list[bool] = []
    with recording(flow) as params:
        traced = trace(net, *args, name="net")
    wl = with_flow(with_requant(traced, params), flow)
    assert [op.a_from_previous for op in wl.ops] == [False, True, False, False]
    assert op_arrays(wl).link.tolist() == [True, False, False, False]
    assert [op.a_from_previous for op in workloads.resolve("mlp").ops] == [False, True, True, True]
    assert not any(op.a_from_previous for op in workloads.resolve("bert_base").ops)  # GELU, residuals, norms


def test_evaluate_reports_the_on_chip_ops_and_no_reuse_turns_it_off():
    config = load_design("tpu-v1")
    wl = workloads.resolve("mlp")
    on, off = perf_model.evaluate(config, wl), perf_model.evaluate(config, wl, reuse=False)
    assert [op.on_chip for op in on.ops] == ["out", "in,out", "in,out", "in"]
    assert all(op.on_chip == "" for op in off.ops)
    assert on.total["dram_read_bytes"] + on.total["dram_write_bytes"] < \
        off.total["dram_read_bytes"] + off.total["dram_write_bytes"]
    assert on.to_dict()["ops"][1]["on_chip"] == "in,out"
