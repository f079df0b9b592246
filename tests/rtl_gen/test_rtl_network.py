# amaranth: UnusedElaboratable=no
"""One program for a GEMM -> GELU -> GEMM network on ``tiny`` with the vector unit
(``system_testlib.run_image``): the first GEMM's requantised output MOVEd into the ifmap, the GELU run there in place,
the second GEMM reading it in place; the network's output bit-exact against JAX (the GEMMs'
references through ``workloads.output_stage`` with the integer GELU between), and the total
cycles of the one program equal to the walk's. A residual block x -> GEMM -> GELU -> GEMM ->
add(x) holds x in the ifmap while both GEMMs run and stores the add's output from the ifmap
(WS and IS); without its VECTOR the output differs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from system_testlib import run_image

import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate.dram.image import pack_qparam_lanes, pack_tensor, program_image, qparam_fields, unpack_tensor
from accel_spec.errors import ModelError
from accel_spec.isa import Opcode
from perf_model.compiler.network import compile_network
from workloads import _int_ops as io
from workloads.ops import Gemm, Requant
from workloads.vector_ops import VectorOp

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
GELU = VectorOp(kind="gelu", shape=(1,), params=tuple(io.GELU_PARAMS.items()))


def _gemms() -> list[Gemm]:
    rq = Requant(multiplier=(1 << 30) + 12345, shift=7, zero_point=0, bits=8)
    return [Gemm(m=6, k=12, n=8, name="up", requant=rq), Gemm(m=6, k=8, n=4, name="down", requant=rq)]


def test_gemm_gelu_gemm_runs_as_one_program_bit_exact_in_the_walks_cycles():
    gemms = _gemms()
    prog = compile_network(TINY, gemms, [GELU])
    assert [c.opcode for c in prog.commands].count(7) == 1  # one VECTOR, in the one queue-load
    assert prog.chunks == ((0, len(prog.commands)),)
    a = np.asarray(workloads.reference(gemms[0], 0).a).astype(np.int64)
    bs = [np.asarray(workloads.reference(g, i + 1).b).astype(np.int64) for i, g in enumerate(gemms)]
    q1 = np.asarray(workloads.output_stage(a @ bs[0], gemms[0].requant)).astype(np.int64)
    g = np.asarray(io.gelu(q1.astype(np.int8))).astype(np.int64)
    want = np.asarray(workloads.output_stage(g @ bs[1], gemms[1].requant)).astype(np.int64)
    t = prog.tensors
    tensors = {"a0": pack_tensor(t["a0"], a)}
    for i, gemm in enumerate(gemms):
        tensors[f"b{i}"] = pack_tensor(t[f"b{i}"], bs[i])
        tensors[f"q{i}"] = pack_qparam_lanes(t[f"q{i}"], qparam_fields(gemm.requant, gemm.n))
    run = run_image(TINY, prog, program_image(prog, tensors))
    assert run.error_code == 0
    got = unpack_tensor(t["c1"], run.dram[t["c1"].base:])
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total


ADD = VectorOp(kind="add", shape=(1,), params=tuple(io.add_params(1 / 16, 1 / 32, 1 / 16).items()))


def _residual(config, drop_add: bool = False, keep_on_chip: bool = True):
    """x (6x8) -> up 6x8x12 -> GELU -> down 6x12x8 -> add(x): the design's output and the reference."""
    rq = Requant(multiplier=(1 << 30) + 12345, shift=7, zero_point=0, bits=8)
    gemms = [Gemm(m=6, k=8, n=12, name="up", requant=rq), Gemm(m=6, k=12, n=8, name="down", requant=rq)]
    prog = compile_network(config, gemms, [GELU, ADD], keep_on_chip=keep_on_chip)
    opcodes = [c.opcode for c in prog.commands]
    assert (Opcode.MOVE in opcodes) == keep_on_chip
    assert opcodes[0] == 1 and opcodes[-1] == 2  # a LOAD first, a STORE last
    if keep_on_chip:  # x LOADed whole, each link's op one VECTOR on its region
        assert opcodes.count(7) == 2
    else:  # each link's op once a chunk of its tensor's DRAM rows (chunks of one row: pipelined in the halves)
        assert opcodes.count(7) > 2 * 4
    a = np.asarray(workloads.reference(gemms[0], 0).a).astype(np.int64)
    bs = [np.asarray(workloads.reference(g, i + 1).b).astype(np.int64) for i, g in enumerate(gemms)]
    h = np.asarray(io.gelu(np.asarray(workloads.output_stage(a @ bs[0], rq)).astype(np.int8)))
    y = np.asarray(workloads.output_stage(h.astype(np.int64) @ bs[1], rq)).astype(np.int8)
    want = np.asarray(io.add(y, a.astype(np.int8), scale_a=1 / 16, scale_b=1 / 32, scale_out=1 / 16)).astype(np.int64)
    t = prog.tensors
    tensors = {"a0": pack_tensor(t["a0"], a)}
    for i, gemm in enumerate(gemms):
        tensors[f"b{i}"] = pack_tensor(t[f"b{i}"], bs[i])
        tensors[f"q{i}"] = pack_qparam_lanes(t[f"q{i}"], qparam_fields(gemm.requant, gemm.n))
    if drop_add:  # the add's VECTOR and its parameter block out (the STORE no longer waits for anything)
        at = len(opcodes) - 1 - opcodes[::-1].index(7)
        prog = dataclasses.replace(prog, commands=prog.commands[:at] + prog.commands[at + 2:],
                                   chunks=((0, len(prog.commands) - 2),))
    run = run_image(config, prog, program_image(prog, tensors))
    assert run.error_code == 0
    return unpack_tensor(t["c1"], run.dram[t["c1"].base:]), want, run


@pytest.mark.parametrize("config", [TINY, dataclasses.replace(TINY, rows=4, cols=2, dataflow="is")],
                         ids=["ws", "is"])
@pytest.mark.parametrize("keep_on_chip", [True, False], ids=["on_chip", "through_dram"])
def test_a_residual_block_runs_as_one_program_with_its_skip_held_on_chip(config, keep_on_chip):
    """On chip: x held in the ifmap, the add on the last GEMM's region. Through DRAM: every link stored,
    its ops run on ifmap chunks of it (the skip's rows loaded beside them) and stored back in place."""
    got, want, run = _residual(config, keep_on_chip=keep_on_chip)
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total


def test_the_residual_block_fails_without_its_add():
    got, want, _ = _residual(TINY, drop_add=True)
    assert (got != want).sum() > want.size // 2


def _norm(kind: str, n: int) -> VectorOp:
    return VectorOp(kind=kind, shape=(1, n), axis=1, params=tuple(io.norm_params(n, 1e-5).items()))


@pytest.mark.parametrize("keep_on_chip", [True, False], ids=["on_chip", "through_dram"])
def test_two_residual_blocks_with_norms_run_as_one_program(keep_on_chip):
    """x -> G0 -> add(x) -> LayerNorm -> h -> G1 -> add(h) -> RMSNorm, 16 tokens of 6 channels on 4 lanes:
    each norm walks its region column-major (a token's two folds 16 words apart; through DRAM, in
    pipelined chunks of 2 tokens, the chunk's rows apart) and writes 0 in the 2 padding lanes G1 reads;
    bit-exact, RTL == walk. Without the column-major walk (rows taken as consecutive words) the output
    differs."""
    rq = Requant(multiplier=(1 << 30) + 12345, shift=7, zero_point=0, bits=8)
    gemms = [Gemm(m=16, k=6, n=6, name="attn", requant=rq), Gemm(m=16, k=6, n=6, name="ffn", requant=rq)]
    links = [(ADD, _norm("layernorm", 6)), (ADD, _norm("rmsnorm", 6))]
    prog = compile_network(TINY, gemms, links, keep_on_chip=keep_on_chip)
    a = np.asarray(workloads.reference(gemms[0], 0).a).astype(np.int64)
    bs = [np.asarray(workloads.reference(g, i + 1).b).astype(np.int64) for i, g in enumerate(gemms)]

    def add(y: np.ndarray, skip: np.ndarray) -> np.ndarray:
        return np.asarray(io.add(y.astype(np.int8), skip.astype(np.int8), scale_a=1 / 16, scale_b=1 / 32,
                                 scale_out=1 / 16)).astype(np.int64)

    y0 = np.asarray(workloads.output_stage(a @ bs[0], rq)).astype(np.int64)
    h = np.asarray(io.layernorm(add(y0, a).astype(np.int8), 1e-5)).astype(np.int64)
    y1 = np.asarray(workloads.output_stage(h @ bs[1], rq)).astype(np.int64)
    want = np.asarray(io.rmsnorm(add(y1, h).astype(np.int8), 1e-5)).astype(np.int64)
    t = prog.tensors
    tensors = {"a0": pack_tensor(t["a0"], a)}
    for i, gemm in enumerate(gemms):
        tensors[f"b{i}"] = pack_tensor(t[f"b{i}"], bs[i])
        tensors[f"q{i}"] = pack_qparam_lanes(t[f"q{i}"], qparam_fields(gemm.requant, gemm.n))
    image = program_image(prog, tensors)
    run = run_image(TINY, prog, image)
    assert run.error_code == 0
    got = unpack_tensor(t["c1"], run.dram[t["c1"].base:])
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total
    flat = [dataclasses.replace(c, fields=tuple((k, 0 if k == "vcolmajor" else v) for k, v in c.fields))
            for c in prog.commands]
    run = run_image(TINY, dataclasses.replace(prog, commands=tuple(flat)), program_image(
        dataclasses.replace(prog, commands=tuple(flat)), tensors))
    assert (unpack_tensor(t["c1"], run.dram[t["c1"].base:]) != want).any()


def test_a_norm_on_an_input_stationary_link_is_refused():
    config = dataclasses.replace(TINY, rows=4, cols=2, dataflow="is")
    with pytest.raises(ModelError, match="needs a token's channels in one row"):
        compile_network(config, _gemms(), [_norm("layernorm", 8)])


def test_a_link_the_unit_cannot_run_in_place_is_refused():
    mul = VectorOp(kind="mul", shape=(1,), params=(("shift", 4),))
    with pytest.raises(ModelError, match="link 0: a mul cannot run in place"):
        compile_network(TINY, _gemms(), [mul])
    with pytest.raises(ModelError, match="second operand must be the input"):  # skip 6x12, output 6x4
        compile_network(TINY, _gemms(), [None, ADD])
    with pytest.raises(ModelError, match="has no vector unit"):
        compile_network(load_design("tiny"), _gemms(), [GELU])


def test_a_block_too_large_for_the_ifmap_runs_through_dram_in_chunks():
    """x (6x96) -> G (6x96x96) -> add(x) -> LayerNorm on a 1 KiB ifmap (256 words): x and G's output
    held together would take 288 words, so the link goes through DRAM (chosen, not asked for): the
    output stored, then loaded back a token at a time beside the same row of x (a token and its skip,
    48 words, fit half the ifmap: the chunks take turns in the halves, pipelined), the add and the
    norm run on each chunk, stored in place; bit-exact, RTL == walk."""
    config = dataclasses.replace(TINY, ifmap_sram_kib=1)
    rq = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)
    gemm = Gemm(m=6, k=96, n=96, name="proj", requant=rq)
    prog = compile_network(config, [gemm], [(ADD, _norm("layernorm", 96))])
    opcodes = [c.opcode for c in prog.commands]
    assert Opcode.MOVE not in opcodes and opcodes.count(Opcode.VECTOR) == 12  # six chunks of two ops
    halves = {c["buf_addr"] for c in prog.commands if c.opcode == Opcode.LOAD and c["buffer"] == 0 and c["rows"] == 1}
    assert {0, 128} <= halves  # the chunks' loads in both halves of the ifmap
    a = np.asarray(workloads.reference(gemm, 0).a).astype(np.int64)
    b = np.asarray(workloads.reference(gemm, 1).b).astype(np.int64)
    y = np.asarray(workloads.output_stage(a @ b, rq)).astype(np.int8)
    s = np.asarray(io.add(y, a.astype(np.int8), scale_a=1 / 16, scale_b=1 / 32, scale_out=1 / 16))
    want = np.asarray(io.layernorm(s, 1e-5)).astype(np.int64)
    t = prog.tensors
    tensors = {"a0": pack_tensor(t["a0"], a), "b0": pack_tensor(t["b0"], b),
               "q0": pack_qparam_lanes(t["q0"], qparam_fields(rq, gemm.n))}
    run = run_image(config, prog, program_image(prog, tensors))
    assert run.error_code == 0
    got = unpack_tensor(t["c0"], run.dram[t["c0"].base:])
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total


@pytest.mark.parametrize("keep_on_chip", [True, False], ids=["on_chip", "through_dram"])
def test_an_add_of_an_external_input_runs_in_the_program(keep_on_chip):
    """G (6x8x8) -> add(s) -> LayerNorm with ``s`` an input of the network of its own (a residual from
    before it, ``EXTERNAL``): loaded whole into a region first (on chip) or by the chunks (through
    DRAM); bit-exact, RTL == walk."""
    from perf_model.compiler.network import EXTERNAL

    rq = _gemms()[0].requant
    gemm = Gemm(m=6, k=8, n=8, name="proj", requant=rq)
    prog = compile_network(TINY, [gemm], [(ADD, _norm("layernorm", 8))], [EXTERNAL], keep_on_chip=keep_on_chip)
    a = np.asarray(workloads.reference(gemm, 0).a).astype(np.int64)
    b = np.asarray(workloads.reference(gemm, 1).b).astype(np.int64)
    skip = np.random.default_rng(5).integers(-128, 128, (6, 8))
    y = np.asarray(workloads.output_stage(a @ b, rq)).astype(np.int8)
    s = np.asarray(io.add(y, skip.astype(np.int8), scale_a=1 / 16, scale_b=1 / 32, scale_out=1 / 16))
    want = np.asarray(io.layernorm(s, 1e-5)).astype(np.int64)
    t = prog.tensors
    tensors = {"a0": pack_tensor(t["a0"], a), "b0": pack_tensor(t["b0"], b), "s0": pack_tensor(t["s0"], skip),
               "q0": pack_qparam_lanes(t["q0"], qparam_fields(rq, gemm.n))}
    run = run_image(TINY, prog, program_image(prog, tensors))
    assert run.error_code == 0
    got = unpack_tensor(t["c0"], run.dram[t["c0"].base:])
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total
