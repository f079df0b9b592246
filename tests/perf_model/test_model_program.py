"""The compiler and the command encoding: what the queue holds, and what the compiler refuses."""

from __future__ import annotations

import dataclasses

import pytest

from accel_spec import isa
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import Buffer, Command, Opcode, decode, encode
from perf_model import compile_gemm, gemm_program_cycles, program_timing
from workloads.ops import Gemm

SMALL = ArrayConfig(rows=2, cols=2, ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1, dram_bytes_per_cycle=2)


def test_every_field_round_trips_through_its_bits():
    cmd = Command.make(Opcode.STORE, wait_run=1, buffer=Buffer.OFMAP, requant=1, q_by_row=1, dram_addr=0xDEADBEEC,
                       dram_stride=0x1234, rows=0xFFFF, words=7, buf_addr=99, row_step=1, word_step=0xFFFFFFFF,
                       q_base=4095, lanes=0xFFFF)
    raw = encode(cmd)
    assert len(raw) == isa.COMMAND_BYTES and decode(raw) == cmd
    word = int.from_bytes(raw, "little")
    assert word >> 240 == 0xFFFF and (word >> 224) & 0xFFFF == 4095  # lanes [240, 256) above q_base
    assert word & 0xF == Opcode.STORE and (word >> 5) & 1 == 1  # opcode in bits 0-3, wait_run in bit 5
    assert (word >> 32) & 0xFFFFFFFF == 0xDEADBEEC  # dram_addr at bit 32, as commands.md documents


def test_a_field_that_does_not_fit_or_does_not_belong_is_refused():
    with pytest.raises(ValueError, match="rows must fit in 16 bits"):
        Command.make(Opcode.LOAD, rows=1 << 16)
    with pytest.raises(ValueError, match="has no field 'm'"):
        Command.make(Opcode.LOAD, m=3)
    with pytest.raises(ValueError, match="opcode must be one of"):
        Command.make(0)


@pytest.mark.parametrize("double", [True, False])
def test_the_compiler_emits_the_runs_of_the_plan_and_stores_each_output_row_once(double):
    config = dataclasses.replace(SMALL, double_buffered=double)
    program = compile_gemm(config, Gemm(m=40, k=48, n=12))
    runs = [c for c in program.commands if c.opcode == Opcode.RUN]
    stores = [c for c in program.commands if c.opcode == Opcode.STORE]
    assert len(runs) == len(program.runs) > 1
    assert sum(c["m"] * c["k"] * c["n"] for c in runs) == 40 * 48 * 12  # the runs cover the GEMM once
    c = program.tensors["c"]
    rows = [s["dram_addr"] - c.base + r * s["dram_stride"] for s in stores for r in range(s["rows"])]
    assert sorted(rows) == [r * c.pitch for r in range(c.rows)]  # every DRAM row of C written exactly once
    outputs = {(t[0], t[1], t[4], t[5]) for t in program.runs}
    if double:  # each output tile but the last is stored in parts, one per run of the next one
        per_tile = len(program.runs) // len(outputs)
        assert len(stores) == (len(outputs) - 1) * per_tile + 1 and per_tile > 1
    else:
        assert len(stores) == len(outputs)


def test_tensors_are_page_aligned_and_do_not_overlap_the_program_or_each_other():
    program = compile_gemm(SMALL, Gemm(m=40, k=48, n=12), requant=True)
    spans = sorted((t.base, t.base + t.nbytes) for t in program.tensors.values())
    assert spans[0][0] >= len(program.commands) * isa.COMMAND_BYTES
    assert all(a % 4096 == 0 for a, _ in spans)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:], strict=False))


def test_a_program_longer_than_the_queue_becomes_consecutive_queue_loads_with_the_same_runs():
    long = compile_gemm(SMALL, Gemm(m=40, k=48, n=12), queue_depth=3)
    assert [b - a for a, b in long.chunks][:-1] == [3] * (len(long.chunks) - 1)
    assert long.chunks[-1][1] == len(long.commands)
    whole = compile_gemm(SMALL, Gemm(m=40, k=48, n=12))
    assert long.commands == whole.commands
    # each queue-load drains the pipeline: never faster, the same compute
    a, b = gemm_program_cycles(SMALL, long), gemm_program_cycles(SMALL, whole)
    assert a.compute == b.compute and a.total > b.total


def test_the_compiler_refuses_what_the_rtl_cannot_run():
    with pytest.raises(ModelError, match="at most 4096 output channels"):
        compile_gemm(SMALL, Gemm(m=2, k=2, n=4097), requant=True)
    tight = dataclasses.replace(SMALL, rows=64, cols=64)
    with pytest.raises(ModelError, match="cannot run"):
        compile_gemm(tight, Gemm(m=8, k=8, n=8))


def test_the_error_codes_and_the_dma_depth_agree_between_rtl_and_model():
    import rtl_gen
    from rtl_gen.soc.regmap import ErrorCode
    from rtl_gen.soc.system import OUTSTANDING

    assert {e.value for e in ErrorCode} == set(isa.ERROR_NAMES)
    assert ErrorCode.BAD_OPCODE == isa.ERROR_OPCODE and ErrorCode.QUEUE_OVERFLOW == isa.ERROR_QUEUE
    assert OUTSTANDING == program_timing.OUTSTANDING
    assert rtl_gen.AxiAccelerator  # the SoC block is public


@pytest.mark.parametrize("bw,want", [(0.5, 1), (3.0, 4), (16.0, 16), (48.57, 64), (100.0, 128), (1e6, 128)])
def test_the_axi_width_is_the_bandwidth_as_a_bus(bw, want):
    assert isa.axi_data_bytes(256, 128, 8, bw) == want  # up to 1024 bits, AXI4's widest
    assert isa.axi_data_bytes(64, 64, 8, bw) == min(want, 64)  # 64 bytes a row: beats of at most 64
    assert isa.axi_data_bytes(12, 64, 8, bw) == min(want, 4)  # 12 bytes a row: 4-byte beats


def test_a_vector_command_round_trips_and_its_parameter_block_is_the_next_slot():
    cmd = Command.make(Opcode.VECTOR, wait_dma=1, wait_vec=1, vkind=9, vcolmajor=1, vsrc=0xFFFFFFFF, vsrc2=7, vdst=123,
                       vrows=0xFFFF, vwords=(1 << 24) - 1, vn=(1 << 24) - 1, vqrows=0xFFFF)
    raw = encode(cmd)
    assert decode(raw) == cmd
    word = int.from_bytes(raw, "little")
    assert word & 0xF == 7 and (word >> 31) & 1 == 1 and (word >> 8) & 0xF == 9  # opcode, wait_vec, vkind
    assert (word >> 12) & 1 == 1  # vcolmajor
    block = Command.make(Opcode.VECTOR_PARAMS, vp0=0xFFFFFFFF, vp7=5)
    assert int.from_bytes(encode(block), "little") == 0xFFFFFFFF | 5 << 224  # no opcode bits: all parameters
    assert isa.ERROR_VECTOR == 7 and isa.ERROR_NAMES[7].startswith("vector command malformed")


def test_the_wait_bits_overlap_no_field_of_any_command():
    """wait_dma, wait_run and wait_vec are read on every command: no opcode may use their bits."""
    waits = {isa.FIELDS[name][0] for name in ("wait_dma", "wait_run", "wait_vec")}
    for opcode, names in isa._PER_OP.items():
        if opcode == Opcode.VECTOR_PARAMS:
            continue  # never decoded as a command
        for name in names:
            lsb, width = isa.FIELDS[name]
            assert not waits & set(range(lsb, lsb + width)), (opcode, name)


def test_the_walk_times_a_vector_command_on_its_own_unit():
    """A VECTOR and its block take one issue; the unit is busy ``1 + rows * (passes * (words + 2) +
    scalar)`` cycles (GELU, one row of 8 words: 11); a RUN with wait_vec waits for it, a LOAD does not."""
    config = dataclasses.replace(SMALL, vector_unit=True)
    vec = Command.make(Opcode.VECTOR, vkind=5, vrows=1, vwords=8, vn=16, vqrows=1)
    block = Command.make(Opcode.VECTOR_PARAMS)
    load = Command.make(Opcode.LOAD, buffer=Buffer.WEIGHT, rows=1, words=1, word_step=1)
    run = Command.make(Opcode.RUN, wait_vec=1, m=1, k=1, n=1)
    t = program_timing.program_cycles(config, [vec, block, load, run])
    assert t.vector == 11 and len(t.issue) == 3
    # The sequencer reads the next command in the cycle after an issue and decodes it in the one
    # after (rtl_gen.soc.sequencer): the LOAD, not blocked, issues 2 cycles after the VECTOR.
    assert t.issue[1] == t.issue[0] + 2  # the LOAD overlaps the unit
    assert t.issue[2] == t.issue[0] + 11 + 1  # the RUN waits until the unit is idle
