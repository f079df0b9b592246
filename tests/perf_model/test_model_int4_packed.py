"""Packed int4 in the model (``pack_int4``): the fast model is the walk, and its DRAM bytes count
half a byte per packed element, as the program's transfers move them.

The walk (``perf_model.program_timing``) is what the RTL's counters equal
(tests/rtl_gen/test_rtl_system_int4.py); here the fast form must equal it on random packed designs,
and the bytes both count must halve against the same design without packing.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perf_model
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError, ModelError
from accel_spec.isa import Opcode
from perf_model import dma_timing, program_timing
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import op_arrays
from perf_model.compiler.scorers import COMPILER_SCORERS
from perf_model.evaluator.design_ops import evaluate_block
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.physical.pe_area import area_coefficients
from workloads.ops import Gemm, Requant

REQUANT = Requant(multiplier=(1 << 30,), shift=(0,))
PAIRS = [("int4", "int4"), ("int4", "int8"), ("int8", "int4")]


def _block(config: ArrayConfig, gemm: Gemm, requant: bool):
    op = Gemm(m=gemm.m, k=gemm.k, n=gemm.n, requant=REQUANT if requant else None)
    return evaluate_block(DesignArrays.from_configs([config]), op_arrays([(op, 1)]), DEFAULT_ENERGY,
                          area_coefficients(), scorers=COMPILER_SCORERS)


def _random_packed(rng: np.random.Generator) -> tuple[ArrayConfig, Gemm, bool]:
    wf, af = PAIRS[int(rng.integers(0, len(PAIRS)))]
    kib = [1, 2, 4, 16]
    config = ArrayConfig(
        rows=int(rng.choice([2, 4, 8, 12, 16])), cols=int(rng.choice([2, 4, 6, 8, 16])),
        dataflow=str(rng.choice(["ws", "os", "is"])), weight_format=wf, act_format=af, pack_int4=True,
        ifmap_sram_kib=int(rng.choice(kib)), weight_sram_kib=int(rng.choice(kib)), ofmap_sram_kib=int(rng.choice(kib)),
        dram_bytes_per_cycle=float(rng.choice([1, 2, 4, 8, 32])), double_buffered=bool(rng.integers(0, 2)),
        shadow_stationary=bool(rng.integers(0, 2)), dram="none")
    return config, Gemm(m=int(rng.integers(1, 200)), k=int(rng.integers(1, 200)), n=int(rng.integers(1, 200))), \
        bool(rng.integers(0, 2))


def test_the_fast_model_is_the_walk_on_random_packed_designs(monkeypatch):
    """Without page boundaries every single-buffered program and every program of one queue-load is
    exact (as for byte lanes, tests/perf_model/test_model_fast_walk.py)."""
    monkeypatch.setattr(dma_timing, "PAGE_BYTES", 1 << 40)
    rng = np.random.default_rng(44)
    cases = exact = 0
    while cases < 40:
        config, gemm, requant = _random_packed(rng)
        try:
            program = perf_model.compile_gemm(config, gemm, requant=requant)
        except ModelError:
            continue
        cases += 1
        walk = perf_model.gemm_program_cycles(config, program)
        block = _block(config, gemm, requant)
        total, compute = block.total_cycles[0, 0], block.compute_cycles[0, 0]
        where = f"{config} {gemm} requant={requant}: walk {walk.total}, fast {total}"
        assert compute == walk.compute, where
        assert 0 <= walk.total - total <= block.boundary_cycles[0, 0], where
        if len(program.chunks) == 1 or not config.double_buffered:
            assert total == walk.total, where
            exact += 1
    assert exact >= 30, exact


def _program_bytes(config: ArrayConfig, gemm: Gemm) -> tuple[int, int]:
    """(read, written) DRAM bytes of the program's A, B and C transfers, as the DMA moves them."""
    program = perf_model.compile_gemm(config, gemm, requant=True)
    beats, W = program_timing.word_beats(config), program.data_bytes
    read = written = 0
    for c in program.commands:
        if c.opcode in (Opcode.LOAD, Opcode.STORE) and c["buffer"] != 3:
            size = c["rows"] * c["words"] * program_timing.transfer_word_beats(c, beats, W) * W
            read += size if c.opcode == Opcode.LOAD else 0
            written += size if c.opcode == Opcode.STORE else 0
    return read, written


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize(("wf", "af"), PAIRS)
def test_model_dram_bytes_are_the_programs_with_half_a_byte_per_packed_element(dataflow, wf, af):
    """Whole words (dims multiples of 16): the model's DRAM bytes are the program's transfers', and
    each packed operand's share halves against the same design in byte lanes (by hand: A is m k,
    B k n, C m n elements, 1 byte each unpacked)."""
    m, k, n = 32, 48, 64
    plain = ArrayConfig(rows=16, cols=16, dataflow=dataflow, weight_format=wf, act_format=af, dram="none",
                        dram_bytes_per_cycle=8.0, ifmap_sram_kib=64, weight_sram_kib=64, ofmap_sram_kib=64)
    packed = dataclasses.replace(plain, pack_int4=True)
    gemm = Gemm(m=m, k=k, n=n)
    got = {}
    for name, config in (("plain", plain), ("packed", packed)):
        block = _block(config, gemm, True)
        model = (block.dram_read[:, 0, 0].sum(), block.dram_write[:, 0, 0].sum())
        assert model == _program_bytes(config, gemm), name
        got[name] = model
    a_half, b_half = (af == "int4") * m * k / 2, (wf == "int4") * k * n / 2
    c_half = (af == "int4") * m * n / 2
    assert got["plain"][0] == m * k + k * n and got["plain"][1] == m * n  # each input crosses once here
    assert got["packed"] == (got["plain"][0] - a_half - b_half, got["plain"][1] - c_half)


@pytest.mark.parametrize(("fields", "rule"), [
    ({"pack_int4": True}, "pack_int4 = true needs an int4 operand, not weight_format int8 with act_format int8"),
    ({"pack_int4": True, "weight_format": "int4", "rows": 3},
     "pack_int4 = true needs even rows and cols (two int4 lanes a byte), not 3x4"),
    ({"pack_int4": 1, "weight_format": "int4"}, "pack_int4 must be true or false, not 1"),
])
def test_pack_int4_is_refused_with_its_rule(fields, rule):
    with pytest.raises(ConfigError) as err:
        ArrayConfig(**{"rows": 4, "cols": 4, **fields})
    assert str(err.value) == rule


def test_pack_int4_false_keeps_the_hash_and_true_changes_it():
    w4 = ArrayConfig(rows=16, cols=16, weight_format="int4", act_format="int8")
    assert dataclasses.replace(w4, pack_int4=False).config_hash == w4.config_hash
    assert "pack_int4" not in ArrayConfig(rows=4, cols=4).config_hash
    assert dataclasses.replace(w4, pack_int4=True).config_hash != w4.config_hash


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("weight,act", PAIRS)
def test_packed_buffers_hold_twice_the_words_in_the_rtl_the_compiler_and_the_model(dataflow, weight, act):
    """A packed int4 operand's buffer has 4-bit lanes: ``kib * 8192 / (lanes * 4)`` words, twice the
    byte-lane design's; the RTL's geometry, the compiler's depths and the fast model's agree."""
    from perf_model.compiler.program import _buffer_depths
    from perf_model.evaluator.reuse_links import ifmap_depth
    from rtl_gen import buffer_layout

    kib = (3, 5, 4)
    config = ArrayConfig(rows=8, cols=4, dataflow=dataflow, weight_format=weight, act_format=act, pack_int4=True,
                         ifmap_sram_kib=kib[0], weight_sram_kib=kib[1], ofmap_sram_kib=kib[2], dram="none")
    lanes = (4, 8) if dataflow == "is" else (8, 4)  # ifmap, weight lanes: IS swaps them
    want = [kib[0] * 8192 // (lanes[0] * (4 if act == "int4" else 8)),
            kib[1] * 8192 // (lanes[1] * (4 if weight == "int4" else 8)), kib[2] * 8192 // (4 * 32)]
    lay = buffer_layout(config)
    assert [lay.ifmap.depth, lay.weight.depth, lay.ofmap.depth] == want
    assert list(_buffer_depths(config)) == want
    assert int(ifmap_depth(DesignArrays.from_configs([config]))[0]) == want[0]
    assert [lay.ifmap.bits, lay.weight.bits] == [4 if act == "int4" else 8, 4 if weight == "int4" else 8]


def test_packed_operands_count_half_the_sram_bytes():
    """The whole GEMM fits either way, so the tiling is the same: the packed W4A4 design's buffers
    read and write A and B at half a byte an element, C (raw int32) as before, so its ifmap and
    weight SRAM energy drop; DRAM bytes halve as before."""
    gemm = Gemm(m=32, k=64, n=32)
    plain = ArrayConfig(rows=8, cols=8, weight_format="int4", act_format="int4", ifmap_sram_kib=64,
                        weight_sram_kib=64, ofmap_sram_kib=64, dram_bytes_per_cycle=64.0, dram="none")
    a, b = (_block(c, gemm, False) for c in (plain, dataclasses.replace(plain, pack_int4=True)))
    assert (a.tile == b.tile).all()
    for kind in ("sram_read", "sram_write"):  # per operand (rows): A and B halve, C stays
        rows_a, rows_b = (getattr(x, kind).reshape(3, -1).sum(axis=1) for x in (a, b))
        ratios = sorted((rows_b / rows_a).tolist())
        assert ratios == pytest.approx([0.5, 0.5, 1.0]), kind
    for part in ("sram_ifmap", "sram_weight"):
        assert float(b.energy[part].sum()) == pytest.approx(float(a.energy[part].sum()) / 2)
    assert float(b.dram_read.sum()) == pytest.approx((32 * 64 + 64 * 32) / 2)
    assert float(a.dram_read.sum()) == pytest.approx(32 * 64 + 64 * 32)
