"""The SoC block runs compiled programs from DRAM: bit-exact against JAX, total cycles equal to the model.

Icarus or Amaranth's simulator (``system_testlib.simulator``), the DRAM model of
``rtl_gen.soc.dram_model`` behind the AXI4 port. Every
dataflow, both buffer settings, several AXI widths and DRAM latencies, requantised stores,
and malformed programs (an error status, never a hang or a write outside the tensors).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from system_testlib import int8_operands, jax_int8_matmul, result, run_soc, run_socs, small

from accel_spec.config import ArrayConfig
from accel_spec.isa import (
    ERROR_AXI,
    ERROR_BUFFER,
    ERROR_DRAM,
    ERROR_OPCODE,
    ERROR_QUEUE,
    Buffer,
    Command,
    Opcode,
)
from perf_model import plan_tiles, program_timing
from perf_model.program_timing import axi_data_bytes, dram_rate
from workloads import Requant, output_stage
from workloads.ops import Gemm


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("double", [True, False])
def test_a_tiled_gemm_from_dram_is_bit_exact_and_takes_the_models_total_cycles(dataflow, double):
    a, b = int8_operands(24, 8, 12)  # 4 K folds by 6 N folds of the 2 x 2 array
    run = run_soc(small(dataflow, double), a, b)
    assert len([c for c in run.program.commands if c.opcode == Opcode.RUN]) > 1  # really tiled
    assert run.error_code == 0
    np.testing.assert_array_equal(result(run), jax_int8_matmul(a, b))
    assert run.total == run.model.total
    assert run.compute == run.model.compute and run.stall == run.model.stall
    assert run.status == 0b010  # DONE, not BUSY, not ERROR; irq raised (run_soc waited for it)
    assert run.total <= run.cycles < run.total + 8  # irq within a few cycles of the end
    assert run.total == run.compute + run.stall


@pytest.mark.parametrize("bw,latency", [(1, 1), (2, 30), (4, 3)])
def test_total_cycles_match_across_axi_widths_and_dram_latencies(bw, latency):
    a, b = int8_operands(24, 20, 8, seed=bw)
    run = run_soc(small("ws", True, rows=4, cols=4, bw=bw), a, b, latency=latency)
    assert run.program.data_bytes == bw
    np.testing.assert_array_equal(result(run), jax_int8_matmul(a, b))
    assert run.total == run.model.total and run.compute == run.model.compute


# Plans that keep one input as a resident strip (perf_model.evaluator.tiling), per dataflow and buffer setting.
# The smallest GEMMs found whose plan still keeps that strip and reads it at several places (the
# test's asserts), so the simulator runs fewer cycles.
_RESIDENT = [("ws", True, (2, 1, 8), (2, 34, 45), "a"), ("ws", False, (4, 1, 1), (2, 61, 49), "a"),
             ("ws", True, (1, 2, 2), (61, 25, 7), "b"), ("os", True, (1, 1, 2), (49, 31, 2), "b"),
             ("is", True, (1, 1, 2), (9, 38, 46), "a"), ("is", True, (1, 8, 1), (45, 33, 2), "b")]


@pytest.mark.parametrize("dataflow,double,kib,gemm,held", _RESIDENT)
def test_a_resident_strip_is_loaded_once_and_read_back_bit_exact_in_the_models_cycles(dataflow, double, kib,
                                                                                     gemm, held):
    m, k, n = gemm
    a, b = int8_operands(m, k, n, seed=m)
    config = dataclasses.replace(small(dataflow, double), ifmap_sram_kib=kib[0], weight_sram_kib=kib[1],
                                 ofmap_sram_kib=kib[2])
    run = run_soc(config, a, b, limit=2_000_000)
    plan = run.program
    assert plan_tiles(config, Gemm(m=m, k=k, n=n)).resident == held
    buffer = Buffer.IFMAP if held == "a" else Buffer.WEIGHT
    loads = [c for c in plan.commands if c.opcode == Opcode.LOAD and c["buffer"] == buffer]
    tensor = plan.tensors[held]
    words = tensor.rows * tensor.row_elems // 2  # a buffer word holds 2 lanes on a 2 x 2 array
    assert sum(c["rows"] * c["words"] for c in loads) == words  # every word of the strip crosses DRAM once
    runs = [c for c in plan.commands if c.opcode == Opcode.RUN]
    base = "x_base" if (held == "a") != (dataflow == "is") else "y_base"
    assert len({c[base] for c in runs}) > 1  # runs read sub-tiles at several places of the strip
    assert run.error_code == 0
    np.testing.assert_array_equal(result(run), jax_int8_matmul(a, b))
    assert run.total == run.model.total and run.compute == run.model.compute


def test_double_buffering_is_faster_in_rtl_exactly_as_the_model_says():
    a, b = int8_operands(20, 12, 8, seed=3)  # the model: double 957 cycles, single 1085
    runs = {double: run_soc(small("ws", double), a, b) for double in (True, False)}
    for run in runs.values():
        np.testing.assert_array_equal(result(run), jax_int8_matmul(a, b))
        assert run.total == run.model.total
    assert runs[True].total < runs[False].total
    assert runs[True].stall < runs[False].stall


@pytest.mark.parametrize("dataflow", ["ws", "is"])
def test_a_requantised_store_writes_the_output_stage_codes(dataflow):
    a, b = int8_operands(9, 14, 6, seed=5)
    rq = Requant(multiplier=(1 << 30, 3 << 28, 1 << 29, 1 << 30, 5 << 27, 1 << 30), shift=(6,),
                 bias=(7, -300, 0, 1, 2, 3),
                 zero_point=-3, act_min=-100, act_max=90)
    run = run_soc(small(dataflow, True), a, b, requant=rq)
    expected = np.asarray(output_stage(jax_int8_matmul(a, b), rq)).astype(np.int64)
    np.testing.assert_array_equal(result(run), expected)
    assert run.total == run.model.total


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_an_output_tile_stored_in_parts_keeps_every_channels_parameters(dataflow):
    a, b = int8_operands(16, 64, 10, seed=11)
    rq = Requant(multiplier=tuple((1 << 30) + (i << 26) for i in range(10)), shift=(7,),
                 bias=tuple(range(-500, 500, 100)), zero_point=2, act_min=-90, act_max=100)
    run = run_soc(small(dataflow, True), a, b, requant=rq)
    stores = [c for c in run.program.commands if c.opcode == Opcode.STORE]
    outputs = {(t[0], t[1], t[4], t[5]) for t in run.program.runs}
    assert len(stores) > len(outputs) > 1  # parts of output tiles ride on the next tile's runs
    np.testing.assert_array_equal(result(run), np.asarray(output_stage(jax_int8_matmul(a, b), rq)).astype(np.int64))
    assert run.total == run.model.total


def test_input_stationary_keeps_the_bus_within_one_parameter_lane():
    # Input stationary, an output-stage parameter word is one 16-byte lane: a 32-byte bus would
    # give it 0 beats and the parameter load would never finish (it did, before the cap).
    config = dataclasses.replace(small("is", True, rows=32, cols=32, bw=32), ifmap_sram_kib=8, weight_sram_kib=8,
                                 ofmap_sram_kib=8)
    a, b = int8_operands(8, 40, 8, seed=13)
    rq = Requant(multiplier=(1 << 30,), shift=(6,), bias=(5,), zero_point=0, act_min=-128, act_max=127)
    run = run_soc(config, a, b, requant=rq)
    assert run.program.data_bytes == 16
    assert run.error_code == 0
    np.testing.assert_array_equal(result(run), np.asarray(output_stage(jax_int8_matmul(a, b), rq)).astype(np.int64))
    assert run.total == run.model.total


def _wide_bus() -> ArrayConfig:
    """A design on a 64-byte bus: 32 x 32 int16 (a row of inputs is 64 bytes) asking 64 B/cycle."""
    return dataclasses.replace(small("ws", True, rows=32, cols=32, bw=64), input_bits=16, acc_bits=48,
                               clock_mhz=500.0, ifmap_sram_kib=4, weight_sram_kib=4, ofmap_sram_kib=16)


# (m, k, n), requantised, program length parity, by queue depth: two commands a beat, so an odd
# length reads one command's bytes past the program; a short queue splits it into queue-loads.
# Few rows of A: the 32 x 32 design makes every simulated cycle dear. K = 70 is three K folds
# (10 and 11 commands); (4, 40, 40) is two K folds by two N folds, 13 commands in 4 queue-loads.
# The programs of one queue depth run one after another in one simulation of the design (building
# Amaranth's simulator of the 32 x 32 array is most of a program's CPU time).
_WIDE = {256: [((4, 70, 20), False, "even"), ((4, 70, 20), True, "odd")], 4: [((4, 40, 40), False, "odd")]}


@pytest.mark.parametrize("queue_depth", sorted(_WIDE))
def test_a_64_byte_bus_fetches_two_commands_a_beat_bit_exact_in_the_models_cycles(queue_depth):
    cases, gemms = _WIDE[queue_depth], []
    for (m, k, n), requant, _ in cases:
        rng = np.random.default_rng(m + k)
        a, b = rng.integers(-1 << 15, 1 << 15, (m, k)), rng.integers(-1 << 15, 1 << 15, (k, n))
        rq = Requant(multiplier=(1 << 30,), shift=(20,), bias=(-7,), zero_point=3, act_min=-30_000,
                     act_max=29_000, bits=16) if requant else None
        gemms.append((a, b, rq))
    runs = run_socs(_wide_bus(), gemms, queue_depth=queue_depth)
    for (_, _, parity), (a, b, rq), run in zip(cases, gemms, runs, strict=True):
        prog = run.program
        assert prog.data_bytes == 64
        assert (prog.chunks[-1][1] - prog.chunks[-1][0]) % 2 == (parity == "odd")  # the last queue-load's
        assert len(prog.chunks) == (1 if queue_depth >= len(prog.commands) else -(-len(prog.commands) // queue_depth))
        assert run.error_code == 0
        with jax.enable_x64(True):
            acc = np.asarray(jnp.matmul(jnp.asarray(a, jnp.int16), jnp.asarray(b, jnp.int16),
                                        preferred_element_type=jnp.int64))
            want = np.asarray(output_stage(acc, rq)).astype(np.int64) if rq is not None else acc
        np.testing.assert_array_equal(result(run), want)
        assert run.total == run.model.total and run.compute == run.model.compute and run.stall == run.model.stall


# A memory slower than the bus: (dataflow, double buffered, rate in bytes a cycle on a 4-byte bus, latency, requant).
_PACED = [("ws", True, Fraction(3), 7, False), ("os", False, Fraction(5, 2), 3, True),
          ("is", True, Fraction(7, 3), 1, False), ("ws", False, Fraction(1, 3), 7, True)]


@pytest.mark.parametrize("dataflow,double,rate,latency,requant", _PACED)
def test_a_paced_dram_moves_beats_on_credit_and_the_walk_counts_every_cycle(dataflow, double, rate, latency,
                                                                            requant):
    a, b = int8_operands(24, 20, 8, seed=int(rate * 6))
    rq = Requant(multiplier=(1 << 30,), shift=(5,), bias=(3,), zero_point=1, act_min=-100, act_max=110)
    config = small(dataflow, double, rows=4, cols=4, bw=4)
    runs = {paced: run_soc(config, a, b, latency=latency, rate=rate if paced else None,
                           requant=rq if requant else None) for paced in (False, True)}
    want = np.asarray(output_stage(jax_int8_matmul(a, b), rq)).astype(np.int64) if requant else jax_int8_matmul(a, b)
    for run in runs.values():
        assert run.error_code == 0
        np.testing.assert_array_equal(result(run), want)
        assert run.total == run.model.total and run.stall == run.model.stall
    moved = sum(c["rows"] * c["words"] for c in runs[True].program.commands if c.opcode in (Opcode.LOAD, Opcode.STORE))
    assert runs[True].total - runs[False].total >= moved * (4 / rate - 1) / 2  # the beats really wait


@pytest.mark.parametrize("rate", [Fraction(1, 3), Fraction(5, 2), Fraction(7, 3)])
def test_a_store_right_after_a_load_waits_for_the_credit_the_reads_left(rate):
    # The compiler never issues a STORE right after a LOAD; by hand, the first write beats find the
    # credit the last read beats left (a read beat spends it the cycle before it arrives).
    config = small("ws", True, rows=4, cols=4, bw=4)
    a, b = int8_operands(4, 4, 4)
    tensors = run_soc(config, a, b).program.tensors
    program = [_cmd(Opcode.LOAD, buffer=Buffer.IFMAP, dram_addr=tensors["a"].base, dram_stride=0, rows=1, words=4,
                    buf_addr=0, row_step=0, word_step=1),
               _cmd(Opcode.STORE, buffer=Buffer.OFMAP, dram_addr=tensors["c"].base, dram_stride=0, rows=1, words=3,
                    buf_addr=0, row_step=0, word_step=1),
               _cmd(Opcode.LOAD, buffer=Buffer.WEIGHT, dram_addr=tensors["b"].base, dram_stride=0, rows=1, words=2,
                    buf_addr=0, row_step=0, word_step=1),
               _cmd(Opcode.STORE, buffer=Buffer.OFMAP, dram_addr=tensors["c"].base, dram_stride=0, rows=1, words=1,
                    buf_addr=0, row_step=0, word_step=1)]  # the program ends when this store does
    run = run_soc(config, a, b, commands=program, latency=2, rate=rate)
    assert run.error_code == 0
    assert run.total == run.model.total


def test_tpu_v1s_ddr3_rate_on_a_64_byte_bus_in_the_walks_cycles():
    """48.57 B/cycle (``tpu-v1``'s DDR3 at 700 MHz) round up to a 64-byte bus, which the DRAM
    model paces to 4857/100 bytes a cycle; requantised, in several queue-loads."""
    config = dataclasses.replace(_wide_bus(), dram_bytes_per_cycle=48.57)
    rate = dram_rate(config)
    assert rate == Fraction(4857, 100) and axi_data_bytes(config) == 64
    rng = np.random.default_rng(3)
    # three K folds, 11 commands in 3 queue-loads of at most 4
    a, b = rng.integers(-1 << 15, 1 << 15, (4, 70)), rng.integers(-1 << 15, 1 << 15, (70, 20))
    rq = Requant(multiplier=(1 << 30,), shift=(20,), bias=(-7,), zero_point=3, act_min=-30_000, act_max=29_000,
                 bits=16)
    run = run_soc(config, a, b, requant=rq, queue_depth=4, rate=rate)
    assert len(run.program.chunks) > 1 and run.error_code == 0
    with jax.enable_x64(True):
        acc = jnp.matmul(jnp.asarray(a, jnp.int16), jnp.asarray(b, jnp.int16), preferred_element_type=jnp.int64)
        np.testing.assert_array_equal(result(run), np.asarray(output_stage(acc, rq)).astype(np.int64))
    assert run.total == run.model.total and run.stall == run.model.stall
    assert run.total > program_timing.gemm_program_cycles(config, run.program, latency=7).total


@pytest.mark.parametrize("dataflow,double", [("ws", True), ("os", False), ("is", True)])
def test_back_pressure_on_every_axi_channel_never_corrupts_data(dataflow, double):
    a, b = int8_operands(10, 12, 6, seed=7)
    calm = run_soc(small(dataflow, double), a, b)
    stalled = run_soc(small(dataflow, double), a, b, stall_seed=0xACE1, requant=None)
    np.testing.assert_array_equal(result(stalled), jax_int8_matmul(a, b))
    assert stalled.total > calm.total  # the channels really were held back


def _cmd(opcode: int, **fields: int) -> Command:
    return Command.make(opcode, **fields)


def test_a_malformed_command_sets_the_error_status_and_stops():
    a, b = int8_operands(4, 4, 4)
    good = run_soc(small(), a, b)
    cmds = list(good.program.commands)
    bad = run_soc(small(), a, b, commands=[cmds[0], Command(opcode=9), *cmds[1:]])
    assert (bad.error_code, bad.error_pc) == (ERROR_OPCODE, 1)
    assert bad.status == 0b100  # ERROR
    c = bad.program.tensors["c"]
    assert not bad.dram[c.base:c.base + c.nbytes].any()  # nothing after the bad command ran


def test_a_transfer_beyond_its_buffer_or_misaligned_is_refused_before_any_traffic():
    a, b = int8_operands(4, 4, 4)
    c = run_soc(small(), a, b).program.tensors["c"]
    beyond = _cmd(Opcode.LOAD, buffer=Buffer.IFMAP, dram_addr=0, dram_stride=2, rows=2, words=1, buf_addr=511,
                  row_step=1, word_step=1)
    run = run_soc(small(), a, b, commands=[beyond])
    assert (run.error_code, run.error_pc) == (ERROR_BUFFER, 0)
    skewed = _cmd(Opcode.STORE, buffer=Buffer.OFMAP, dram_addr=c.base + 1, dram_stride=c.pitch, rows=1, words=1,
                  buf_addr=0, row_step=1, word_step=1)
    run = run_soc(small(), a, b, commands=[skewed])
    assert run.error_code == ERROR_DRAM
    assert not run.dram[c.base:c.base + c.nbytes].any()


def test_a_program_longer_than_the_queue_and_a_dram_address_beyond_memory_are_errors():
    a, b = int8_operands(4, 4, 4)
    run = run_soc(small(), a, b, queue_len=257)
    assert run.error_code == ERROR_QUEUE and run.cycles < 10
    far = _cmd(Opcode.LOAD, buffer=Buffer.WEIGHT, dram_addr=1 << 30, dram_stride=2, rows=1, words=2, buf_addr=0,
               row_step=1, word_step=1)
    run = run_soc(small(), a, b, commands=[far])
    assert run.error_code == ERROR_AXI
