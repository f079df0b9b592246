"""Properties on random designs and GEMMs (hypothesis): monotonicity, bounds, finiteness,
vectorised == scalar, independence of design order and block size."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_testlib import SLOW_MHZ

import perf_model
import perf_model.figures.design_table as table_module
from accel_spec.config import ArrayConfig
from workloads.ops import Conv2d, Gemm, Workload

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def configs(draw) -> ArrayConfig:
    input_bits = draw(st.sampled_from([8, 16]))
    return ArrayConfig(
        rows=draw(st.integers(1, 64)), cols=draw(st.integers(1, 64)),
        dataflow=draw(st.sampled_from(["ws", "os", "is"])), input_bits=input_bits,
        acc_bits=draw(st.integers(2 * input_bits, 64)),
        ifmap_sram_kib=draw(st.integers(1, 256)), weight_sram_kib=draw(st.integers(1, 256)),
        ofmap_sram_kib=draw(st.integers(1, 256)),
        dram_bytes_per_cycle=draw(st.floats(0.25, 128.0)), clock_mhz=draw(st.floats(100.0, 2000.0)),
        double_buffered=draw(st.booleans()), tech_nm=draw(st.integers(5, 180)),
    )


gemms = st.builds(Gemm, m=st.integers(1, 3000), k=st.integers(1, 3000), n=st.integers(1, 3000),
                  batch=st.integers(1, 4))
op_lists = st.lists(st.tuples(gemms, st.integers(1, 3)), min_size=1, max_size=4)


def table(designs: list[ArrayConfig], ops) -> perf_model.DesignTable:
    return perf_model.evaluate_designs(perf_model.DesignArrays.from_configs(designs), ops)


def dram(t: perf_model.DesignTable, i: int) -> float:
    return float(t.dram_read_bytes[i] + t.dram_write_bytes[i])


@SETTINGS
@given(configs(), op_lists, st.floats(1.01, 64.0))
def test_more_bandwidth_never_costs_cycles(config, ops, factor):
    faster = dataclasses.replace(config, dram_bytes_per_cycle=config.dram_bytes_per_cycle * factor)
    t = table([config, faster], ops)
    assert t.feasible[0] == t.feasible[1]
    assert t.total_cycles[1] <= t.total_cycles[0] * (1 + 1e-12)
    assert t.compute_cycles[1] == t.compute_cycles[0]
    assert dram(t, 1) == dram(t, 0)


@SETTINGS
@given(configs(), op_lists, st.sampled_from(["ifmap_sram_kib", "weight_sram_kib", "ofmap_sram_kib"]),
       st.integers(1, 4096))
def test_bigger_buffers_never_move_more_dram_bytes(config, ops, buffer, extra):
    bigger = dataclasses.replace(config, **{buffer: getattr(config, buffer) + extra})
    t = table([config, bigger], ops)
    if t.feasible[0]:
        assert t.feasible[1]
        assert dram(t, 1) <= dram(t, 0)


@SETTINGS
@given(st.lists(configs(), min_size=1, max_size=6), op_lists)
def test_utilization_in_unit_interval_and_everything_finite(designs, ops):
    t = table(designs, ops)
    assert not (t.overflow & t.feasible).any()  # an overflow is never a feasible design
    for f in dataclasses.fields(t):
        if f.name in ("reason", "energy_breakdown", "conv_notes", "feasible", "overflow"):
            continue
        values = np.asarray(getattr(t, f.name), dtype=np.float64)
        assert np.isfinite(values).all(), f.name
        assert (values[~t.feasible] == 0).all(), f.name
        assert (values >= 0).all(), f.name
    for values in t.energy_breakdown.values():
        assert np.isfinite(values).all()
    ok = t.feasible
    assert ((t.utilization[ok] > 0) & (t.utilization[ok] <= 1)).all()
    assert (t.total_cycles[ok] >= t.compute_cycles[ok]).all()
    assert all((r == "") == bool(f) for r, f in zip(t.reason, t.feasible, strict=True))
    assert len(t.conv_notes) == len(t.feasible) and all(isinstance(n, str) for n in t.conv_notes)


@SETTINGS
@given(st.lists(configs(), min_size=1, max_size=5), op_lists)
def test_vectorised_equals_scalar(designs, ops):
    workload = Workload(name="w", ops=tuple(op for op, _ in ops), counts=tuple(c for _, c in ops))
    t = table(designs, workload)
    for i, config in enumerate(designs):
        result = perf_model.evaluate(config, workload)
        assert (result.status == "ok") == bool(t.feasible[i])
        assert result.reason == t.reason[i]
        total = result.total
        for key in ("compute_cycles", "macs", "dram_read_bytes", "dram_write_bytes", "energy_pj",
                    "latency_s", "area_mm2", "power_w", "tops", "tops_per_w", "edp", "utilization",
                    "total_cycles", "stall_cycles"):
            assert math.isclose(total[key], float(getattr(t, key)[i]), rel_tol=1e-12, abs_tol=1e-12), key
        for op in result.ops:
            for key in ("folds", "compute_cycles", "stall_cycles", "total_cycles", "utilization", "macs",
                        "dram_read_bytes", "dram_write_bytes", "sram_read_bytes", "sram_write_bytes",
                        "energy_pj", "latency_s"):
                assert math.isfinite(getattr(op, key)), key
            if op.status == "ok":
                assert 0 < op.utilization <= 1


@settings(max_examples=20, deadline=None)
@given(st.lists(configs(), min_size=2, max_size=12), op_lists, st.randoms())
def test_results_do_not_depend_on_design_order_or_block_size(designs, ops, rnd):
    base = table(designs, ops)
    order = list(range(len(designs)))
    rnd.shuffle(order)
    shuffled = table([designs[i] for i in order], ops)
    saved = table_module.BLOCK_ELEMENTS
    try:
        table_module.BLOCK_ELEMENTS = 3  # one design per block
        small = table(designs, ops)
    finally:
        table_module.BLOCK_ELEMENTS = saved
    for f in dataclasses.fields(base):
        if f.name == "energy_breakdown":
            continue
        a = getattr(base, f.name)
        b = [getattr(shuffled, f.name)[order.index(i)] for i in range(len(designs))]
        c = getattr(small, f.name)
        assert list(a) == list(b) == list(c), f.name


def test_conv_and_gemm_records_both_accepted():
    ops = [(Conv2d(n=1, h=8, w=8, c_in=4, c_out=8, kh=3, kw=3, groups=2), 1), (Gemm(m=4, k=4, n=4), 2)]
    t = table([ArrayConfig(rows=4, cols=4)], ops)
    assert t.feasible[0]
    assert t.macs[0] == 6 * 6 * 8 * 2 * 9 + 2 * 64  # 6 x 6 output pixels, 2 input channels per group


def _random_columns(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    input_bits = rng.choice([8, 16], n)
    return dict(rows=rng.integers(1, 65, n), cols=rng.integers(1, 65, n), dataflow=rng.integers(0, 3, n),
                input_bits=input_bits, acc_bits=2 * input_bits + rng.integers(0, 17, n),
                ifmap_sram_kib=rng.integers(1, 64, n), weight_sram_kib=rng.integers(1, 64, n),
                ofmap_sram_kib=rng.integers(1, 64, n), dram_bytes_per_cycle=rng.uniform(0.25, 64.0, n),
                double_buffered=rng.integers(0, 2, n).astype(bool), clock_mhz=np.full(n, SLOW_MHZ))


def test_monotone_in_buffers_and_bandwidth_on_many_random_pairs():
    """The same properties on 20,000 design pairs x 4 GEMMs at once (the vectorised path)."""
    rng = np.random.default_rng(2024)
    n = 20000
    small = _random_columns(rng, n)
    bigger = {k: v.copy() for k, v in small.items()}
    which = rng.integers(0, 3, n)
    extra = rng.integers(1, 200, n)
    for i, name in enumerate(["ifmap_sram_kib", "weight_sram_kib", "ofmap_sram_kib"]):
        bigger[name] = np.where(which == i, bigger[name] + extra, bigger[name])
    faster = dict(small, dram_bytes_per_cycle=small["dram_bytes_per_cycle"] * rng.uniform(1.0, 16.0, n))
    for _ in range(4):
        ops = [(Gemm(m=int(rng.integers(1, 3000)), k=int(rng.integers(1, 3000)), n=int(rng.integers(1, 3000))), 1)]
        a, b, c = (perf_model.evaluate_designs(perf_model.DesignArrays.from_columns(**cols), ops)
                   for cols in (small, bigger, faster))
        moved_a = a.dram_read_bytes + a.dram_write_bytes
        moved_b = b.dram_read_bytes + b.dram_write_bytes
        assert not (a.feasible & ~b.feasible).any()
        assert (moved_b[a.feasible] <= moved_a[a.feasible]).all()
        assert (c.total_cycles[a.feasible] <= a.total_cycles[a.feasible] * (1 + 1e-12)).all()


def test_feasible_exactly_when_the_smallest_tile_fits():
    """The documented rule, computed independently: the smallest tile is one fold along the
    array rows and columns (or the whole dim) and min(Ds, max(R, C)) streamed rows; it must fit
    every buffer (contract words vs depth, half of it when double buffered)."""
    from perf_model import timing

    rng = np.random.default_rng(99)
    n = 20000
    cols = _random_columns(rng, n)
    cols.update(ifmap_sram_kib=rng.integers(1, 17, n), weight_sram_kib=rng.integers(1, 17, n),
                ofmap_sram_kib=rng.integers(1, 17, n), rows=rng.integers(1, 129, n), cols=rng.integers(1, 129, n))
    designs = perf_model.DesignArrays.from_columns(**cols)
    shapes = [tuple(int(v) for v in rng.integers(1, 2000, 3)) for _ in range(3)]
    shapes += [(1, 1000, 512), (700, 1, 300), (64, 900, 1)]  # a dim of 1 (batch-1 FC, rank-1, GEMV)
    for m, k, n_ in shapes:
        got = perf_model.evaluate_designs(designs, [(Gemm(m=m, k=k, n=n_), 1)]).feasible
        df, R, C = designs.dataflow, designs.rows, designs.cols
        ds, dr, dc = timing.array_dims(df, m, k, n_)
        tr, tc, ts = np.minimum(dr, R), np.minimum(dc, C), np.minimum(ds, np.maximum(R, C))
        mt = np.select([df == 0, df == 1], [ts, tr], tc)  # WS streams M, OS has M on rows, IS on columns
        kt = np.where(df == 1, ts, tr)
        nt = np.where(df == 2, ts, tc)
        need = timing.run_words(df, R, C, mt, kt, nt)
        elems = timing.word_elems(df, R, C)
        bits = (designs.input_bits, designs.input_bits, designs.acc_bits)
        kib = (designs.ifmap_sram_kib, designs.weight_sram_kib, designs.ofmap_sram_kib)
        fits = np.ones(len(designs), dtype=bool)
        for b in range(3):
            depth = timing.buffer_depth_words(kib[b], elems[b], bits[b])
            fits &= need[b] <= np.where(designs.double_buffered, depth // 2, depth)
        assert 0.01 < fits.mean() < 0.99  # both kinds present
        # and the accumulator holds the worst sum k * (2^(b-1))^2 (else: status overflow)
        holds = k * 2.0 ** (2 * designs.input_bits - 2) <= 2.0 ** (designs.acc_bits - 1) - 1
        np.testing.assert_array_equal(got, fits & holds)
