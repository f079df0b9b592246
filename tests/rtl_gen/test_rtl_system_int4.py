"""Packed int4 on the SoC (``pack_int4``): operands two a byte in DRAM, sign-extended by the DMA into
8-bit buffer lanes, int4 outputs packed two a byte on the requantising STORE.

The DRAM bytes of A and B are written here by hand (element ``2i`` in the low nibble of byte
``i``), not by the simulator's packer, so a swapped nibble order in the RTL gives wrong products;
the product is numpy's on Python integers; cycles are the walk's. The W4A4 PE multiplies only
the low nibbles of its 8-bit lanes, so a missing sign extension shows only where a packed int4
operand meets the 8x8 integer PE (W4A8, W8A4): those designs run here too, and the unpacking
itself is checked lane by lane against numpy.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from system_testlib import run_image, small

from accel_dse.simulate.dram.image import pack_qparam_lanes, program_image, qparam_fields
from accel_spec.isa import Opcode
from perf_model.compiler.program import compile_gemm
from workloads import Requant
from workloads.ops import Gemm

#: int4 outputs: act_min/act_max of the int4 range, a scale that sends many values past both ends.
RQ = Requant(multiplier=(1 << 30,), shift=(2,), bias=(3,), zero_point=0, act_min=-8, act_max=7)


def _int4_operands(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a, b = rng.integers(-8, 8, (m, k)), rng.integers(-8, 8, (k, n))
    a[0, 0], a[-1, -1], b[0, 0], b[-1, -1] = -8, 7, -8, 7  # both ends of int4 in each operand
    return a, b


def _packed_by_hand(layout, x: np.ndarray) -> np.ndarray:
    """The DRAM bytes of ``x`` in ``layout`` (packed: nibbles, even element low; else one
    two's-complement byte an element), on Python ints."""
    stored = x.T if layout.transposed else x
    out = bytearray(layout.nbytes)
    for r in range(layout.rows):
        for e in range(stored.shape[1]):
            if not layout.packed:
                out[r * layout.pitch + e] = int(stored[r, e]) & 0xFF
                continue
            nibble = int(stored[r, e]) & 0xF
            at = r * layout.pitch + e // 2
            out[at] |= nibble << (4 * (e % 2))
    return np.frombuffer(bytes(out), dtype=np.uint8)


def _unpacked_by_hand(layout, raw: np.ndarray) -> np.ndarray:
    p, q = layout.shape
    width = p if layout.transposed else q
    rows = np.zeros((layout.rows, width), dtype=np.int64)
    for r in range(layout.rows):
        for e in range(width):
            if not layout.packed:
                byte = int(raw[r * layout.pitch + e])
                rows[r, e] = byte - 256 if byte >= 128 else byte
                continue
            nibble = (int(raw[r * layout.pitch + e // 2]) >> (4 * (e % 2))) & 0xF
            rows[r, e] = nibble - 16 if nibble >= 8 else nibble
    return rows.T if layout.transposed else rows


def _requant_by_hand(acc: np.ndarray, rq: Requant) -> np.ndarray:
    out = np.zeros_like(acc)
    for (i, j), v in np.ndenumerate(acc):
        y = ((int(v) + rq.bias[0]) * rq.multiplier[0] + (1 << (30 + rq.shift[0]))) >> (31 + rq.shift[0])
        out[i, j] = min(max(y + rq.zero_point, rq.act_min), rq.act_max)
    return out


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize(("size", "narrow"), [(4, False), (8, True)])
def test_packed_w4a4_gemm_is_bit_exact_with_odd_sizes_edge_values_and_model_cycles(dataflow, size, narrow):
    """3x5 @ 5x3: rows of 5 and 3 int4 elements leave a half-filled last byte. On a 4x4 array the
    words are whole; on an 8x8 one (4-byte packed words, 2-byte bus) rows of 3 or 5 are narrow
    transfers (``lanes`` 4: one beat)."""
    m, k, n = 3, 5, 3
    a, b = _int4_operands(m, k, n)
    config = small(dataflow, rows=size, cols=size, bw=2.0, weight_format="int4", act_format="int4", pack_int4=True)
    prog = compile_gemm(config, Gemm(m=m, k=k, n=n), requant=True)
    lanes = [c["lanes"] for c in prog.commands if c.opcode in (Opcode.LOAD, Opcode.STORE) and c["lanes"]]
    assert bool(lanes) == narrow and all(x == 4 for x in lanes)
    ta, tb, tc = (prog.tensors[x] for x in "abc")
    assert ta.packed and tb.packed and tc.packed
    tensors = {"a": _packed_by_hand(ta, a), "b": _packed_by_hand(tb, b),
               "q": pack_qparam_lanes(prog.tensors["q"], qparam_fields(RQ, n))}
    run = run_image(config, prog, program_image(prog, tensors))
    assert run.error_code == 0
    want = _requant_by_hand(a @ b, RQ)
    assert want.min() == -8 and want.max() == 7  # saturation at both ends of int4 on output
    got = _unpacked_by_hand(tc, run.dram[tc.base:tc.base + tc.nbytes])
    np.testing.assert_array_equal(got, want)
    assert run.total == run.model.total and run.stall == run.model.stall


#: Outputs of the mixed designs, in the activation format: W4A8's int8 (a scale of 1/2), W8A4's
#: int4 (a scale of 1/256, for int8 x int4 sums of up to 5 x 1024); each sends some values past both ends.
RQ_MIXED = {"int8": Requant(multiplier=(1 << 30,), shift=(0,), bias=(3,), zero_point=0, act_min=-128, act_max=127),
            "int4": Requant(multiplier=(1 << 30,), shift=(7,), bias=(3,), zero_point=0, act_min=-8, act_max=7)}


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize(("wfmt", "afmt"), [("int4", "int8"), ("int8", "int4")])
def test_a_packed_int4_operand_of_the_8x8_pe_is_sign_extended_by_the_dma(dataflow, wfmt, afmt):
    """W4A8 and W8A4 with ``pack_int4``: the int4 operand is packed in DRAM and its nibbles reach
    the 8x8 integer PE as 8-bit lanes, so every negative int4 element checks the sign extension
    (zero extension turns -8..-1 into 8..15). The int8 operand spans its whole range."""
    m, k, n = 3, 5, 3
    rng = np.random.default_rng(1)
    a4, b4 = _int4_operands(m, k, n, seed=1)
    a = a4 if afmt == "int4" else rng.integers(-128, 128, (m, k))
    b = b4 if wfmt == "int4" else rng.integers(-128, 128, (k, n))
    wide = a if afmt == "int8" else b
    wide[0, 0], wide[-1, -1] = -128, 127
    narrow = a if afmt == "int4" else b
    assert (narrow < 0).sum() >= 4 and narrow.min() == -8  # negative nibbles: their upper bits matter
    rq = RQ_MIXED[afmt]
    config = small(dataflow, rows=4, cols=4, bw=2.0, weight_format=wfmt, act_format=afmt, pack_int4=True)
    prog = compile_gemm(config, Gemm(m=m, k=k, n=n), requant=True)
    ta, tb, tc = (prog.tensors[x] for x in "abc")
    assert (ta.packed, tb.packed, tc.packed) == (afmt == "int4", wfmt == "int4", afmt == "int4")
    tensors = {"a": _packed_by_hand(ta, a), "b": _packed_by_hand(tb, b),
               "q": pack_qparam_lanes(prog.tensors["q"], qparam_fields(rq, n))}
    run = run_image(config, prog, program_image(prog, tensors))
    assert run.error_code == 0
    want = _requant_by_hand(a @ b, rq)
    assert want.min() == rq.act_min and want.max() == rq.act_max  # saturation at both ends
    assert len(np.unique(want)) > 3  # and values between them
    got = _unpacked_by_hand(tc, run.dram[tc.base:tc.base + tc.nbytes])
    np.testing.assert_array_equal(got, want)
    assert run.total == run.model.total and run.stall == run.model.stall


def test_unpack_int4_sign_extends_every_nibble_as_numpy_does():
    """``unpack_int4`` on a 2-lane word, all 256 bytes, in Amaranth's simulator: each 8-bit lane is
    numpy's int8 of the nibble shifted to the top and back (an arithmetic shift)."""
    from amaranth import Elaboratable, Module, Signal
    from amaranth.sim import Simulator

    from rtl_gen.core.int4_lanes import unpack_int4

    class Unpack(Elaboratable):
        def __init__(self) -> None:
            self.word, self.lanes = Signal(8), Signal(16)

        def elaborate(self, platform):
            m = Module()
            m.d.comb += self.lanes.eq(unpack_int4(self.word, 2))
            return m

    dut, got = Unpack(), []

    async def bench(ctx) -> None:
        for byte in range(256):
            ctx.set(dut.word, byte)
            got.append(ctx.get(dut.lanes))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    words = np.arange(256, dtype=np.uint8)
    lo = ((words << 4).astype(np.int8) >> 4).astype(np.uint8).astype(np.int64)
    hi = (words.astype(np.int8) >> 4).astype(np.uint8).astype(np.int64)
    assert len(got) == 256
    np.testing.assert_array_equal(np.array(got), lo | (hi << 8))
    assert lo[0x8] == 0xF8 and hi[0x80] == 0xF8  # -8 in both lanes: sign bits set


@pytest.mark.parametrize("dataflow", ["ws", "is"])
def test_packed_transfers_move_half_the_bytes_of_byte_lanes(dataflow):
    """The program's int4 transfers move half the DRAM bytes of the same design without packing
    (bytes from each command's rows x words x beats, as the DMA counts them)."""
    base = small(dataflow, rows=4, cols=4, bw=2.0, weight_format="int4", act_format="int4")
    gemm = Gemm(m=8, k=16, n=8)

    def moved(config) -> dict[int, int]:
        from perf_model.program_timing import transfer_word_beats, word_beats
        prog = compile_gemm(config, gemm, requant=True)
        beats, out = word_beats(config), {}
        for c in prog.commands:
            if c.opcode in (Opcode.LOAD, Opcode.STORE) and c["buffer"] in (0, 1, 2):
                key = (c.opcode, c["buffer"])
                out[key] = out.get(key, 0) + c["rows"] * c["words"] * transfer_word_beats(c, beats, prog.data_bytes) \
                    * prog.data_bytes
        return out

    plain, packed = moved(base), moved(dataclasses.replace(base, pack_int4=True))
    assert plain.keys() == packed.keys()
    for key in plain:
        assert packed[key] * 2 == plain[key], key


@pytest.mark.parametrize(("fields", "cell"), [
    ({"weight_format": "int4", "act_format": "int4"}, "int"),  # a design file without pack_int4: as before
    ({"weight_format": "int4", "act_format": "int4", "pack_int4": True}, "int4"),
    ({"weight_format": "int4", "act_format": "int8", "pack_int4": True}, "int"),  # an int8 operand: 8x8 multiplier
    ({"weight_format": "int8", "act_format": "int4", "pack_int4": True}, "int"),
])
def test_only_packed_w4a4_builds_the_int4_pe(fields, cell):
    from accel_spec.config import ArrayConfig
    from rtl_gen.core.pe import pe_cell_format

    assert pe_cell_format(ArrayConfig(rows=4, cols=4, **fields)) == cell
