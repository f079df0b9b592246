# amaranth: UnusedElaboratable=no
"""The vector unit's door (``rtl_gen.core.vector_door``) in Amaranth's simulator: every code of each
format in, every int8 code out, against conversions written here from the formats' bit fields with
``fractions.Fraction`` (not from ``workloads.vector_door``, which is checked against them too), and
the words of a transpose (both ways) and of a RoPE table (second operand) passed through."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from amaranth.sim import Simulator

from accel_spec.errors import ConfigError
from accel_spec.vector_isa import VECTOR_CODES
from rtl_gen.core.vector_door import VectorDoor
from tests.door_testlib import bf16_codes, finite, in_by_hand, out_by_hand, value
from workloads.vector_door import from_unit, to_unit

LANES = 16


def _run_door(name: str, kind: str, rd: list[int], rd2: list[int], wr: list[int]) -> tuple[list[int], ...]:
    """Lane values through the door, a word of ``LANES`` at a time: (unit rd, unit rd2, buffer wr) as int8."""
    door = VectorDoor(lanes=LANES, number_format=name)
    got: tuple[list[int], list[int], list[int]] = ([], [], [])
    lb = door.lane_bits

    def pack(vals: list[int], bits: int) -> int:
        return sum((v & ((1 << bits) - 1)) << (bits * i) for i, v in enumerate(vals))

    def unpack(word: int, bits: int) -> list[int]:
        lanes = [(word >> (bits * i)) & ((1 << bits) - 1) for i in range(LANES)]
        return [v - (1 << bits) if v >> (bits - 1) else v for v in lanes]

    async def tb(ctx):
        ctx.set(door.start, 1)
        ctx.set(door.kind, VECTOR_CODES[kind])
        await ctx.tick()
        ctx.set(door.start, 0)
        ctx.set(door.kind, 0)  # the door holds the kind it latched at start
        for w in range(0, len(rd), LANES):
            ctx.set(door.buf_rd_data, pack(rd[w:w + LANES], lb))
            ctx.set(door.buf_rd2_data, pack(rd2[w:w + LANES], lb))
            ctx.set(door.unit_wr_data, pack(wr[w:w + LANES], 8))
            await ctx.delay(1e-9)
            for out, port, bits in zip(got, (door.unit_rd_data, door.unit_rd2_data, door.buf_wr_data), (8, 8, lb),
                                       strict=True):
                out.extend(unpack(ctx.get(port), bits))

    sim = Simulator(door)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got


def _pad(vals: list[int]) -> list[int]:
    return vals + [0] * (-len(vals) % LANES)


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2", "int4", "bf16"])
def test_every_code_in_and_every_int8_out_by_hand(name):
    """fp8: every finite code; int4: every value; bf16: every code of the exponents that matter (from
    rounding to 0 to saturation) and the extremes (bf16_codes)."""
    codes = list(range(-8, 8)) if name == "int4" else bf16_codes() if name == "bf16" else finite(name)
    codes = _pad(codes * (256 // len(codes)) if name == "int4" else codes)
    q = list(range(-128, 128))
    n = max(len(codes), len(q))
    codes, q = codes + [0] * (n - len(codes)), q + [0] * (n - len(q))
    rd, rd2, wr = _run_door(name, "add", codes, codes[::-1], q)
    want_in = [in_by_hand(c, name) for c in codes]
    assert rd == want_in
    assert rd2 == [in_by_hand(c, name) for c in codes[::-1]]
    want_out = [out_by_hand(v, name) for v in q]
    if name == "int4":  # an int4 value sign-extended in its byte lane
        assert all(-8 <= v <= 7 for v in wr)
    assert wr == want_out
    # the numpy reference the simulate checks use is the same conversion
    assert list(to_unit(np.array(codes), name)) == want_in
    assert list(from_unit(np.array(q), name)) == want_out


def test_the_conversions_round_ties_to_even_and_saturate():
    """Spot values of the hand rules (so the rules themselves are pinned): E4M3 1/32 (0.5 of a unit
    code) -> 0, 3/32 -> 2; 448 -> 127, -448 -> -128; int8 17 (1.0625, between E4M3 1.0 and 1.125)
    -> 1.0 (even), 19 -> 1.25; int4: 8 -> 0 (tie, even), 24 -> 2, 127 -> 7 (saturated), -128 -> -8."""
    assert in_by_hand(0x10, "fp8_e4m3") == 0 and value(0x10, "fp8_e4m3") == Fraction(1, 32)
    assert in_by_hand(0x1C, "fp8_e4m3") == 2 and value(0x1C, "fp8_e4m3") == Fraction(3, 32)
    assert in_by_hand(0x7E, "fp8_e4m3") == 127 and in_by_hand(0xFE - 256, "fp8_e4m3") == -128
    assert value(out_by_hand(17, "fp8_e4m3"), "fp8_e4m3") == 1
    assert value(out_by_hand(19, "fp8_e4m3"), "fp8_e4m3") == Fraction(5, 4)
    assert [out_by_hand(v, "int4") for v in (8, 24, 127, -128)] == [0, 2, 7, -8]


@pytest.mark.parametrize("name", ["fp8_e4m3", "int4"])
def test_a_transpose_moves_codes_and_a_rope_table_is_read_as_it_is(name):
    codes = _pad(list(range(-128, 128)))
    rd, rd2, wr = _run_door(name, "transpose", codes, codes, codes)
    assert rd == codes and rd2 == codes and wr == codes
    data = list(range(-8, 8)) * LANES if name == "int4" else finite(name)[:LANES * 4]
    rd, rd2, _ = _run_door(name, "rope", data, codes[:len(data)], [0] * len(data))
    assert rd == [in_by_hand(c, name) for c in data]  # the rotated data converts
    assert rd2 == codes[:len(data)]  # the table does not


def test_the_door_refuses_a_format_it_does_not_convert():
    for bad in ("int8", "int16", "fp4"):
        with pytest.raises(ConfigError, match="door converts"):
            VectorDoor(lanes=4, number_format=bad)


def test_a_bf16_door_reads_a_rope_tables_low_bytes():
    """bf16 lanes are 16 bits: the host writes each table byte sign-extended, the door passes its low
    byte to the unit's second operand while the first converts."""
    table = _pad(list(range(-128, 128)))
    data = bf16_codes()[:len(table)]
    rd, rd2, _ = _run_door("bf16", "rope", data, table, [0] * len(table))
    assert rd == [in_by_hand(c, "bf16") for c in data]
    assert rd2 == table
