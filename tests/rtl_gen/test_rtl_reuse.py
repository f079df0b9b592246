"""On-chip reuse across layers on the SoC block: a layer's output MOVEd into the ifmap is the
next layer's A, read in place; bit-exact against the JAX network, each program's total cycles
equal to the walk's, with reuse on and off."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from system_testlib import run_soc_chain, small

from accel_spec.config import ArrayConfig
from accel_spec.isa import Buffer, Opcode
from perf_model.program_timing import axi_data_bytes, dram_rate
from workloads import Requant, output_stage


def _network(a: np.ndarray, bs: list[np.ndarray], rqs: list[Requant]) -> np.ndarray:
    x = a
    for b, rq in zip(bs, rqs, strict=True):
        acc = jnp.matmul(jnp.asarray(x, jnp.int8), jnp.asarray(b, jnp.int8), preferred_element_type=jnp.int32)
        x = np.asarray(output_stage(acc, rq)).astype(np.int64)
    return x


def _layers(m: int, dims: list[int], seed: int) -> tuple[np.ndarray, list[np.ndarray], list[Requant]]:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, dims[0]))
    bs = [rng.integers(-128, 128, (k, n)) for k, n in zip(dims, dims[1:], strict=False)]
    rqs = [Requant(multiplier=tuple(int(v) for v in rng.integers(1 << 30, 1 << 31, n)), shift=(6,),
                   bias=tuple(int(v) for v in rng.integers(-400, 400, n)), zero_point=int(rng.integers(-5, 5)))
           for n in dims[1:]]
    return a, bs, rqs


@pytest.mark.parametrize("dataflow,rows,cols", [("ws", 2, 2), ("is", 2, 3)])
@pytest.mark.parametrize("double", [True, False])
def test_a_three_layer_chain_kept_on_chip_is_bit_exact_and_takes_the_walks_cycles(dataflow, rows, cols, double):
    a, bs, rqs = _layers(40, [10, 6, 5, 3], seed=3)  # 40: the WS double-buffered tiles split M
    expected = _network(a, bs, rqs)
    config = small(dataflow, double, rows=rows, cols=cols)
    runs = {reuse: run_soc_chain(config, a, bs, rqs, reuse=reuse) for reuse in (True, False)}
    on, off = runs[True], runs[False]
    assert on.regions[0] is not None and on.regions[1] is not None and off.regions == (None, None)
    assert on.regions[0] != on.regions[1]  # the two links' regions alternate ends of the ifmap
    for run in (on, off):
        assert run.codes == [0, 0, 0]
        np.testing.assert_array_equal(run.out, expected)
        assert run.totals == run.models
    # Kept on chip: the first op stores nothing, the later ones load no A, and only the last stores.
    ops = [[(c.opcode, c["buffer"]) for c in p.commands] for p in on.programs]
    assert (Opcode.STORE, Buffer.OFMAP) not in ops[0] and (Opcode.STORE, Buffer.OFMAP) not in ops[1]
    assert all((Opcode.LOAD, Buffer.IFMAP) not in o for o in ops[1:])
    assert all(any(code == Opcode.MOVE for code, _ in o) for o in ops[:2])
    assert sum(on.totals) < sum(off.totals)
    # WS double buffered, the tiles split M, so the in-place reads need the RUN's a_stride.
    assert dataflow != "ws" or not double or any(c.opcode == Opcode.RUN and c["a_stride"] != c["m"]
                                                 for p in on.programs[1:] for c in p.commands)


def test_a_chain_kept_on_chip_on_a_paced_64_byte_bus_takes_the_walks_cycles():
    """32 x 32 int16 on a 64-byte bus paced to 48.57 B/cycle: MOVE and in-place reads with two
    commands a beat and the beats on credit."""
    config = dataclasses.replace(small("ws", True, rows=32, cols=32, bw=48.57), input_bits=16, acc_bits=48,
                                 clock_mhz=500.0, ifmap_sram_kib=16, weight_sram_kib=8, ofmap_sram_kib=16)
    rate = dram_rate(config)
    assert axi_data_bytes(config) == 64 and rate == Fraction(4857, 100)
    rng = np.random.default_rng(5)
    a = rng.integers(-1 << 15, 1 << 15, (8, 32))
    bs = [rng.integers(-1 << 15, 1 << 15, (32, 32)), rng.integers(-1 << 15, 1 << 15, (32, 24))]
    rqs = [Requant(multiplier=(1 << 30,), shift=(18,), bias=(-9,), zero_point=2, act_min=-30_000, act_max=30_000,
                   bits=16) for _ in bs]
    run = run_soc_chain(config, a, bs, rqs, reuse=True, rate=rate)
    assert run.regions[0] is not None and run.codes == [0, 0]
    with jax.enable_x64(True):
        x = a
        for b, rq in zip(bs, rqs, strict=True):
            acc = jnp.matmul(jnp.asarray(x, jnp.int16), jnp.asarray(b, jnp.int16), preferred_element_type=jnp.int64)
            x = np.asarray(output_stage(acc, rq)).astype(np.int64)
    np.testing.assert_array_equal(run.out, x)
    assert run.totals == run.models


def test_input_stationary_reads_a_k_split_input_in_place_through_its_column_fold_stride():
    """IS holds A in the ifmap by m-fold: a run over part of K reads its folds ``K`` words apart."""
    a, bs, rqs = _layers(6, [10, 120, 5], seed=9)  # 120 x 5 weights: the second op's runs split K
    config = ArrayConfig(rows=2, cols=3, dataflow="is", ifmap_sram_kib=4, weight_sram_kib=1, ofmap_sram_kib=1,
                         dram_bytes_per_cycle=2, double_buffered=True)
    run = run_soc_chain(config, a, bs, rqs, reuse=True)
    assert run.regions[0] is not None and run.codes == [0, 0]
    runs = [c for c in run.programs[1].commands if c.opcode == Opcode.RUN]
    assert any(c["k"] < 120 and c["a_stride"] == 120 for c in runs) and len({c["m"] for c in runs}) >= 1
    assert any(c["m"] > 3 for c in runs)  # two m-folds in one run: the stride is used
    np.testing.assert_array_equal(run.out, _network(a, bs, rqs))
    assert run.totals == run.models
