# amaranth: UnusedElaboratable=no
"""The vector unit inside the SoC block (Amaranth's simulator, ``tiny`` with ``vector_unit``):
VECTOR commands through the queue, operands loaded into the ifmap and outputs stored from it,
every kind bit-exact against its JAX integer definition (``workloads._int_ops``) with the
program's total cycles equal to the walk's (``perf_model.program_timing``); a malformed VECTOR
stops with ERROR_CODE 7, a design without the unit refuses the opcode, and a broken unit fails
the comparison."""

from __future__ import annotations

import dataclasses

import numpy as np
from amaranth import Module
from amaranth.lib import wiring
from system_testlib import run_image

from accel_dse.design_files import load_design
from accel_dse.simulate.dram.image import pack_tensor, program_image, unpack_tensor
from accel_spec.isa import ERROR_OPCODE, ERROR_VECTOR, Command, Opcode
from perf_model.compiler.vector import vector_program
from perf_model.vector_timing import vector_cycles
from rtl_gen.core.vector_unit import VectorUnit
from workloads import _int_ops as io
from workloads.vector_ops import VectorOp

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)


def _op(kind: str, shape: tuple[int, ...], params: dict[str, int], axis: int | None = None) -> VectorOp:
    return VectorOp(kind=kind, shape=shape, axis=axis, params=tuple(params.items()))


def _cases() -> list[tuple[VectorOp, np.ndarray, np.ndarray | None, np.ndarray]]:
    """``(op, x, y, reference)`` for every kind the unit runs, with edge values (a RoPE's ``y``: its
    table, as the host lays it out)."""
    from tests.rtl_gen.vector_testlib import rope_table

    rng = np.random.default_rng(28)
    codes = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)[:, ::3]  # 86 codes, both extremes among them
    other = rng.integers(-128, 128, codes.shape, dtype=np.int8)
    rows = np.stack([np.full(9, 37, np.int8), np.full(9, -128, np.int8),  # zero variance, the most negative
                     np.where(np.arange(9) % 2, 127, -128).astype(np.int8), rng.integers(-128, 128, 9, dtype=np.int8)])
    scores = rng.integers(-128, 128, (1, 2, 3, 6), dtype=np.int8)
    scores[0, 0, 0] = 5  # an all-equal row
    q = 1.0 / 16
    image = rng.integers(-128, 128, (1, 5, 5, 6), dtype=np.int8)
    image[0, 0, 0] = -128  # a corner whose clipped window holds the most negative code
    maps = rng.integers(-128, 128, (2, 3, 3, 5), dtype=np.int8)
    window = {"window_h": 3, "window_w": 3, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}
    whole = {"window_h": 3, "window_w": 3, "stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0}
    heads = rng.integers(-128, 128, (1, 2, 2, 8), dtype=np.int8)
    heads[0, 0, 0], heads[0, 1, 1] = -128, 127  # position 0 (the identity) and a saturating rotation
    rope = _op("rope", heads.shape, {"start": 0, "theta": 10000})
    return [
        (_op("add", codes.shape, io.add_params(q, 2 * q, q)), codes, other, io.add(codes, other, scale_a=q,
                                                                                   scale_b=2 * q, scale_out=q)),
        (_op("mul", codes.shape, {"shift": 4}), codes, other, io.mul(codes, other)),
        (_op("relu", codes.shape, {}), codes, None, io.relu(codes)),
        (_op("relu6", codes.shape, {"act_max": 96}), codes, None, io.relu6(codes)),
        (_op("gelu", codes.shape, io.GELU_PARAMS), codes, None, io.gelu(codes)),
        (_op("silu", codes.shape, {"gated": 1}), codes, other, io.silu(codes, other)),
        (_op("layernorm", rows.shape, io.norm_params(9, 1e-5), axis=1), rows, None, io.layernorm(rows, 1e-5)),
        (_op("rmsnorm", rows.shape, io.norm_params(9, 1e-6), axis=1), rows, None, io.rmsnorm(rows, 1e-6)),
        (_op("softmax", scores.shape, io.softmax_params(0.5, 1), axis=3), scores, None,
         io.softmax(scores, scale=0.5, causal_offset=1)),
        (_op("maxpool", image.shape, window), image, None, io.maxpool(image, window=3, stride=2, pad=1)),
        (_op("avgpool", maps.shape, whole), maps, None, io.global_avgpool(maps).reshape(2, 1, 1, 5)),
        (rope, heads, rope_table(rope, TINY.vector_lanes), io.rope(heads, start=0)),
    ]


def _run(cases: list, config=TINY, **soc: object) -> tuple[list[np.ndarray], object]:
    prog = vector_program(config, [op for op, *_ in cases])
    t = prog.tensors
    tensors = {}
    for i, (_, x, y, _) in enumerate(cases):
        for name, data in ((f"x{i}", x), (f"y{i}", y)):
            if data is not None:
                tensors[name] = pack_tensor(t[name], np.asarray(data, np.int64).reshape(t[name].shape))
    run = run_image(config, prog, program_image(prog, tensors), **soc)
    outs = [unpack_tensor(t[f"z{i}"], run.dram[t[f"z{i}"].base:]).reshape(np.shape(ref))
            for i, (_, _, _, ref) in enumerate(cases)]
    return outs, run


def test_every_vector_kind_runs_through_the_queue_bit_exact_in_the_models_cycles():
    cases = _cases()
    outs, run = _run(cases)
    assert run.error_code == 0
    for (op, _, _, ref), got in zip(cases, outs, strict=True):
        want = np.asarray(ref).astype(np.int64)
        bad = np.argwhere(got != want)
        assert bad.size == 0, f"{op.kind}: {len(bad)} mismatches, first at {tuple(bad[0])}"
    assert run.total == run.model.total  # the whole program, loads and stores overlapping the unit
    assert run.model.vector == sum(vector_cycles(op, TINY.vector_lanes) for op, *_ in cases)
    assert run.compute == 0 and run.stall == run.total  # the counters name the array's cycles only


def test_the_unit_takes_the_ifmap_words_lanes_on_an_input_stationary_non_square_design():
    """IS: an ifmap word has C lanes (here 2 on a 4 x 2 array), and so has the unit."""
    config = dataclasses.replace(TINY, rows=4, cols=2, dataflow="is")
    assert config.vector_lanes == 2
    cases = [_cases()[i] for i in (0, 4, 6, 8)]  # add, gelu, layernorm, softmax
    outs, run = _run(cases, config)
    assert run.error_code == 0 and run.total == run.model.total
    for (op, _, _, ref), got in zip(cases, outs, strict=True):
        assert (got == np.asarray(ref)).all(), op.kind


class _BrokenUnit(wiring.Component):
    """The vector unit with bit 0 of every result word's first lane stuck at 1 (test-only)."""

    def __init__(self, **kwargs: int) -> None:
        self.unit = VectorUnit(**kwargs)
        super().__init__(dict(self.unit.signature.members.items()))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.unit = unit = self.unit
        for name, member in self.signature.members.items():
            outer, inner = getattr(self, name), getattr(unit, name)
            if name == "wr_data":
                m.d.comb += outer.eq(inner | 1)
            else:
                m.d.comb += outer.eq(inner) if member.flow == wiring.Out else inner.eq(outer)
        return m


def test_a_broken_unit_fails_the_comparison():
    cases = _cases()[2:3]  # ReLU: half its outputs are 0, whose bit 0 the fault sets
    outs, run = _run(cases, vector_factory=_BrokenUnit)
    assert run.error_code == 0 and run.total == run.model.total
    assert (outs[0] != np.asarray(cases[0][3])).any()


def _malformed(config, commands: list[Command]):
    prog = vector_program(TINY, [_cases()[2][0]])
    prog = dataclasses.replace(prog, commands=tuple(commands), chunks=((0, len(commands)),))
    return run_image(config, prog, program_image(prog, {}))


def test_a_malformed_vector_command_stops_with_error_code_7():
    good = list(vector_program(TINY, [_cases()[2][0]]).commands)
    head, block = good[1], good[2]
    assert head.opcode == Opcode.VECTOR
    beyond = dataclasses.replace(head, fields=tuple((k, 4000 if k == "vdst" else v) for k, v in head.fields))
    sync = Command.make(Opcode.SYNC)
    run = _malformed(TINY, [sync, beyond, block])  # its output would pass the ifmap's 1024 words
    assert (run.error_code, run.error_pc) == (ERROR_VECTOR, 1)
    pool = list(vector_program(TINY, [_cases()[9][0]]).commands)  # the 5x5x6 max pool, 3x3 out
    p_head, p_block = pool[1], pool[2]
    assert p_head.opcode == Opcode.VECTOR and p_head["vkind"] == 10
    assert (p_head["vwords"], p_block["vp7"]) == (50, 18)  # 25 pixels of 2 words in, 9 out
    # its output region is checked for its own size (register 7), not the input's 50 words: at word
    # 1006 its 18 words fit (it runs), at 1007 they pass the ifmap's 1024
    for dst, code in ((1006, 0), (1007, ERROR_VECTOR)):
        moved = dataclasses.replace(p_head, fields=tuple((k, dst if k == "vdst" else v) for k, v in p_head.fields))
        assert _malformed(TINY, [sync, moved, p_block]).error_code == code, dst
    rope = list(vector_program(TINY, [_cases()[11][0]]).commands)  # 2 positions of 2 heads of 8
    r_head, r_block = rope[2], rope[3]  # after the LOADs of x and of the table
    assert r_head.opcode == Opcode.VECTOR and (r_head["vrows"], r_head["vwords"], r_head["vqrows"]) == (4, 2, 2)
    # its table (2 rows of 4 words) is checked for vrows * vwords + 2 * vwords = 12 words
    for src2, code in ((1012, 0), (1013, ERROR_VECTOR)):
        moved = dataclasses.replace(r_head, fields=tuple((k, src2 if k == "vsrc2" else v) for k, v in r_head.fields))
        assert _malformed(TINY, [sync, moved, r_block]).error_code == code, src2
    run = _malformed(TINY, [sync, head])  # no slot left for its parameter block
    assert (run.error_code, run.error_pc) == (ERROR_VECTOR, 1)
    bare = load_design("tiny")
    run = _malformed(bare, [sync, head, block])  # a design without the unit: not an opcode it has
    assert (run.error_code, run.error_pc) == (ERROR_OPCODE, 1)
