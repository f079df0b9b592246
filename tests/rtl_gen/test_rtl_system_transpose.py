# amaranth: UnusedElaboratable=no
"""The vector unit's transpose inside the SoC block (Amaranth's simulator, ``tiny`` with
``vector_unit``, 4 lanes): LOAD the rows and a filled output region into the ifmap, VECTOR
transpose (``perf_model.compiler.vector.transpose_commands``), STORE the whole output region: the
transposed rows bit-exact against numpy's ``.T``, the rest of each output row as it was, in the
walk's total cycles (``perf_model.program_timing``); a transpose whose pitch cannot hold an output
row, or whose ``vn * vp0`` output words pass the ifmap, stops with ERROR_VECTOR."""

from __future__ import annotations

import dataclasses

import numpy as np
from system_testlib import run_image

from accel_dse.design_files import load_design
from accel_dse.simulate.dram.image import pack_tensor, program_image, unpack_tensor
from accel_spec.config import Dataflow
from accel_spec.isa import ERROR_VECTOR, Buffer, Command, Opcode, axi_data_bytes
from perf_model.compiler.program import PAGE, GemmProgram, TensorLayout
from perf_model.compiler.vector import ifmap_words, transpose_commands

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
LANES = TINY.vector_lanes
FILL = 90  # the output region's code before the run
JUNK = -77  # the input rows' padding lanes (past n): no output may show it


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


def _program(commands: list[Command], shapes: dict[str, tuple[int, int]]) -> GemmProgram:
    """``commands`` with DRAM tensors of ``(rows, bytes a row)`` after them (int8, page aligned)."""
    data_bytes = axi_data_bytes(TINY.rows, TINY.cols, TINY.input_bits, TINY.dram_bytes_per_cycle,
                                TINY.dataflow is Dataflow.IS)
    base = _align(len(commands) * 32, PAGE)
    tensors = {}
    for name, (rows, width) in shapes.items():
        tensors[name] = TensorLayout(name, base, rows, width, 1, False, (rows, width))
        base = _align(base + rows * width, PAGE)
    return GemmProgram(tuple(commands), tensors, 0, base, data_bytes, False, (), ((0, len(commands)),))


def _transfer(opcode: int, t: TensorLayout, buf_addr: int, row_step: int, **waits: int) -> Command:
    return Command.make(opcode, **waits, buffer=Buffer.IFMAP, dram_addr=t.base, dram_stride=t.pitch, rows=t.rows,
                        words=t.row_elems // LANES, buf_addr=buf_addr, row_step=row_step, word_step=1)


def _transpose_on_chip(x: np.ndarray, pitch: int, dst: int):
    """LOAD ``x`` (rows of ``ceil(n / lanes)`` words at ifmap word 0) and the filled output region (at
    ``dst``), VECTOR transpose, STORE the region: ``(region as (n, pitch * lanes) codes, run)``."""
    rows, n = x.shape
    words = -(-n // LANES)
    # the tensors' shapes are all that the transfers read; the commands are made again with their bases
    shapes = {"x": (rows, words * LANES), "fill": (n, pitch * LANES), "z": (n, pitch * LANES)}
    draft = _program([Command.make(Opcode.SYNC)] * 6, shapes)
    t = draft.tensors
    commands = [_transfer(Opcode.LOAD, t["x"], 0, words), _transfer(Opcode.LOAD, t["fill"], dst, pitch),
                *transpose_commands(LANES, rows, n, src=0, dst=dst, out_pitch=pitch, wait_dma=1),
                _transfer(Opcode.STORE, t["z"], dst, pitch, wait_vec=1)]
    prog = dataclasses.replace(draft, commands=tuple(commands), chunks=((0, len(commands)),))
    padded = np.full((rows, words * LANES), JUNK, np.int64)
    padded[:, :n] = x
    image = program_image(prog, {"x": pack_tensor(t["x"], padded),
                                 "fill": pack_tensor(t["fill"], np.full(shapes["fill"], FILL, np.int64))})
    run = run_image(TINY, prog, image)
    return unpack_tensor(t["z"], run.dram[t["z"].base:]), run


def test_a_transpose_through_the_queue_bit_exact_in_the_walks_cycles():
    """6 rows of 7 codes (a part-filled block and word) into rows of 2 words at a pitch of 3: each
    output row the input's column, zero past its 6 codes, its third word still the fill."""
    x = np.random.default_rng(13).integers(-128, 128, (6, 7), dtype=np.int8)
    x[0, 0], x[5, 6] = -128, 127
    region, run = _transpose_on_chip(x, 3, 100)
    assert run.error_code == 0
    want = np.full((7, 3 * LANES), FILL, np.int64)
    want[:, :2 * LANES] = 0
    want[:, :6] = x.T
    bad = np.argwhere(region != want)
    assert bad.size == 0, f"{len(bad)} mismatches, first at {tuple(bad[0])}"
    assert run.model.vector == 1 + 2 * 2 + 6 * 2 + 2 * 7  # blocks x words, rows x words, blocks x n
    assert run.total == run.model.total  # the whole program, the loads and the store around the unit


def _error(pitch: int, dst: int, src2: int = 0) -> int:
    """ERROR_CODE of a lone transpose of 6 rows of 7 codes with pitch ``pitch`` to ``dst``."""
    head, block = transpose_commands(LANES, 6, 7, src=0, dst=dst, out_pitch=max(pitch, 2))
    head = dataclasses.replace(head, fields=tuple((k, src2 if k == "vsrc2" else v) for k, v in head.fields))
    block = Command.make(Opcode.VECTOR_PARAMS, vp0=pitch)
    commands = [Command.make(Opcode.SYNC), head, block]
    prog = _program(commands, {})
    run = run_image(TINY, prog, program_image(prog, {}))
    assert run.error_code in (0, ERROR_VECTOR) and run.error_pc == (1 if run.error_code else 0)
    return run.error_code


def test_a_malformed_transpose_stops_with_error_code_7():
    depth = ifmap_words(TINY)
    # the pitch: 2 words hold 8 lanes >= 6 rows, 1 word holds 4 < 6
    assert (_error(2, 0), _error(1, 0)) == (0, ERROR_VECTOR)
    # the output region is vn * vp0 = 7 * 3 = 21 words (not vrows * vwords = 12): at depth - 21 it
    # fits, one word later it passes the ifmap
    assert (_error(3, depth - 21), _error(3, depth - 20)) == (0, ERROR_VECTOR)
    # vsrc2 is checked too (the compiler sets it to vsrc): 12 words from it
    assert (_error(2, 0, src2=depth - 12), _error(2, 0, src2=depth - 11)) == (0, ERROR_VECTOR)
