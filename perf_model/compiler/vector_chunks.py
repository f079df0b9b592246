"""One vector op as a program of its own, of any size: whole when it fits the ifmap, else in chunks.

:func:`vector_op_program` is the program an op-by-op design runs for one
:class:`~workloads.vector_ops.VectorOp` (what ``simulate`` runs and the evaluator walks):

* when the op's operands and output fit the ifmap together, :func:`perf_model.compiler.vector.vector_program`
  of the op alone (operands LOADed whole, one ``VECTOR``, the output STOREd whole);
* else the same DRAM tensors (``x0``, ``y0``, ``z0``: the same layout) in chunks of whole *units*
  that fit the ifmap, each chunk: LOAD its units of every operand, ``VECTOR`` on them, STORE its
  units of the output, each tensor's units one contiguous run of words in DRAM and in the ifmap
  (operand and output regions apart, as in the whole program). A unit is
  * a row (a normalisation's or softmax's reduction; a causal softmax's query period of
    ``qrows`` rows, whose mask restarts at each period);
  * a word of ``lanes`` elements of an element-wise op of one row (the last chunk holds the rest);
  * an image of a pooling (its input and pooled output); a pooling whose image does not fit is cut
    within each image into bands of output rows with the input rows their windows read (when one
    output row does not fit, of fewer channel words; when one of a single channel word does not
    either, tiles of one output row's columns), each band or tile a run whose registers
    (``accel_spec.vector_isa.pool_registers``) name its own size and top and left padding;
  * a position of a RoPE: its ``qrows`` rows (heads) and its table row.

  A causal softmax's period or a RoPE's position that does not fit is cut into runs of its rows
  (the mask's offset moved to each run's first row; the position's table row loaded for each run).

  When two chunks fit the ifmap, the op is cut into at least
  :data:`perf_model.compiler.network.PIPELINE_CHUNKS` chunks taking turns in the ifmap's two halves,
  ordered by :func:`perf_model.compiler.network.pipelined` (the next chunk loads while the unit
  runs this one, as a conv network's DRAM links do); else the chunks run one after the other, each
  filling the ifmap. A program longer than one queue-load runs as several
  (``perf_model.compiler.network._split``; the ifmap keeps its contents between them).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ModelError
from accel_spec.isa import (
    COMMAND_BYTES,
    QUEUE_DEPTH,
    Buffer,
    Command,
    FieldRangeError,
    Opcode,
    axi_data_bytes,
    queue_entry_commands,
)
from accel_spec.vector_isa import pool_registers
from perf_model.compiler.dram_space import DRAM_ADDRESS_BYTES
from perf_model.compiler.network import _WORDS_MAX, PIPELINE_CHUNKS, _split, pipelined
from perf_model.compiler.program import PAGE, GemmProgram, TensorLayout
from perf_model.compiler.vector import (
    VectorRegisters,
    ifmap_words,
    region_shapes,
    vector_commands,
    vector_program,
    vector_registers,
)
from perf_model.vector_timing import MAX_ROWS, VectorPlan, vector_plan
from workloads.vector_ops import VectorOp

__all__ = ["vector_op_program", "op_units", "chunk_steps"]


def op_units(plan: VectorPlan) -> tuple[int, dict[str, int]]:
    """``(units, words)``: how many units the op of ``plan`` is cut at (module docstring), and the
    words one unit takes of each tensor (``x0``, ``y0`` for a second operand or a table, ``z0``)."""
    if plan.pool is not None:
        return plan.rows, {"x0": plan.words, "z0": plan.out_words}
    if plan.table_words:
        row = plan.qrows * plan.words
        return plan.table_rows, {"x0": row, "y0": plan.table_words, "z0": row}
    if plan.rows == 1 and plan.passes == 1:  # element-wise, one row: units of one word
        per = 1
        units = plan.words
    else:
        per = plan.qrows * plan.words
        units = plan.rows // plan.qrows
    names = ("x0", "y0", "z0") if plan.operands == 2 else ("x0", "z0")
    return units, dict.fromkeys(names, per)


def _chunk_plan(plan: VectorPlan, u0: int, count: int) -> VectorPlan:
    """The plan of units ``u0 .. u0 + count`` of ``plan`` (runs of whole periods past ``MAX_ROWS`` rows)."""
    if plan.pool is not None:
        return dataclasses.replace(plan, rows=count)
    if plan.rows == 1 and plan.passes == 1 and not plan.table_words:
        return dataclasses.replace(plan, words=count, n=min(count * plan.lanes, plan.n - u0 * plan.lanes))
    rows = count * plan.qrows
    run_rows = MAX_ROWS - MAX_ROWS % plan.qrows if rows > MAX_ROWS else 0
    return dataclasses.replace(plan, rows=rows, run_rows=run_rows)


def _fits_whole(config: ArrayConfig, op: VectorOp) -> GemmProgram | None:
    """The whole-op program, or ``None`` when its regions or a transfer exceed the ifmap or a field."""
    try:
        return vector_program(config, [op])
    except (ModelError, FieldRangeError):
        return None


@dataclass(frozen=True)
class _Move:
    """One transfer of a chunk: ``rows`` DRAM rows of ``words`` words, ``stride`` words apart, from
    word ``offset`` of tensor ``name``; contiguous in the ifmap (``rows * words`` words)."""

    name: str
    offset: int
    rows: int
    words: int
    stride: int


#: One chunk: its transfers (the operands' loads, then the output's one store) and the unit's plan and
#: parameter registers for it.
_Chunk = tuple[tuple[_Move, ...], VectorPlan, tuple[int, ...]]


def _unit_chunks(plan: VectorPlan, params: tuple[int, ...], avail: int, pipeline: bool,
                 in_place: bool = False) -> list[_Chunk] | None:
    """Chunks of whole units (:func:`op_units`) in ``avail`` ifmap words (``in_place``: the output
    written over the input, taking no words of its own): at least :data:`PIPELINE_CHUNKS` with
    ``pipeline``; ``None`` if one unit does not fit."""
    units, unit = op_units(plan)
    room = min(avail // (sum(unit.values()) - (unit["z0"] if in_place else 0)), _WORDS_MAX // max(unit.values()))
    if room < 1:
        return None
    per = min(-(-units // PIPELINE_CHUNKS) if pipeline else units, room)
    out = []
    for u0 in range(0, units, per):
        count = min(per, units - u0)
        moves = tuple(_Move(name, u0 * words, 1, count * words, count * words) for name, words in unit.items())
        out.append((moves, _chunk_plan(plan, u0, count), params))
    return out


def _window_span(o0: int, count: int, stride: int, pad: int, window: int, size: int) -> tuple[int, int, int]:
    """Input ``(first, end, top padding)`` along one axis that outputs ``o0 .. o0 + count`` read."""
    first = max(0, o0 * stride - pad)
    end = max(first + 1, min(size, (o0 + count - 1) * stride - pad + window))
    return first, end, first - (o0 * stride - pad)


def _band_chunks(plan: VectorPlan, avail: int, pipeline: bool) -> list[_Chunk] | None:
    """A pooling whose image does not fit ``avail`` words: per image, bands of output rows (and
    their input rows, the window's halo included) of as many channel words as fit; when one output
    row of one channel word does not fit either, tiles of one output row and of the output columns
    that fit. Each band or tile a run whose registers name its own size and top (left) padding
    (0 past the image's first rows or columns). ``None`` if one output pixel does not fit."""
    g = plan.pool
    if g is None:
        return None
    s, wh, sw, ww = g.stride_h, g.window_h, g.stride_w, g.window_w
    field = (1 << 16) - 1

    def rows_fit(cw: int) -> int:  # output rows a band of ``cw`` channel words holds, at most
        by_words = (avail // cw - max(wh - s, 0) * g.in_w) // (s * g.in_w + g.out_w)
        return min(by_words, (field - max(wh - s, 0) * g.in_w) // (s * g.in_w), g.out_h)

    def cols_fit(cw: int) -> int:  # output columns a one-row tile of ``cw`` channel words holds
        return min((avail // cw - wh * max(ww - sw, 0)) // (wh * sw + 1), g.out_w)

    cw, ow = g.words_c, g.out_w
    band = rows_fit(cw)
    if band < 1:
        cw = min(avail // (wh * g.in_w + g.out_w), g.words_c)
        band = rows_fit(cw) if cw >= 1 else 0
    if band < 1:  # one output row of every channel word does not fit: tiles of one row's columns
        cw, band = g.words_c, 1
        if cols_fit(cw) < 1:
            cw = min(avail // (wh * ww + 1), g.words_c)
        if cw < 1 or cols_fit(cw) < 1:
            return None
        ow = cols_fit(cw)
    if pipeline:
        band = min(band, max(1, -(-g.out_h * plan.rows // PIPELINE_CHUNKS)))
    out = []
    for image in range(plan.rows):
        for w0 in range(0, g.words_c, cw):
            width = min(cw, g.words_c - w0)
            for o0 in range(0, g.out_h, band):
                oh = min(band, g.out_h - o0)
                b0, b1, pad_h = _window_span(o0, oh, s, g.pad_h, wh, g.in_h)
                for c0 in range(0, g.out_w, ow):
                    cols = min(ow, g.out_w - c0)
                    a0, a1, pad_w = _window_span(c0, cols, sw, g.pad_w, ww, g.in_w)
                    sub = dataclasses.replace(g, in_h=b1 - b0, in_w=a1 - a0, out_h=oh, out_w=cols, pad_h=pad_h,
                                              pad_w=pad_w, words_c=width)
                    pixel = image * g.in_h * g.in_w
                    if ow == g.out_w:  # whole rows: the band's pixels one after another
                        loads = [_Move("x0", (pixel + b0 * g.in_w) * g.words_c + w0, (b1 - b0) * g.in_w, width,
                                       g.words_c)]
                    else:  # a tile: a load per input row
                        loads = [_Move("x0", (pixel + r * g.in_w + a0) * g.words_c + w0, a1 - a0, width, g.words_c)
                                 for r in range(b0, b1)]
                    store = _Move("z0", ((image * g.out_h + o0) * g.out_w + c0) * g.words_c + w0, oh * cols, width,
                                  g.words_c)  # whole rows, or one row's columns
                    chunk_plan = dataclasses.replace(plan, rows=1, words=(b1 - b0) * (a1 - a0) * width, pool=sub)
                    out.append(((*loads, store), chunk_plan, pool_registers(sub)))
    return out


def _period_chunks(plan: VectorPlan, params: tuple[int, ...], avail: int, pipeline: bool,
                   in_place: bool = False) -> list[_Chunk] | None:
    """A causal softmax's query period or a RoPE's position that does not fit ``avail`` words: runs
    of its rows within each period (a run restarts the period: a softmax's mask offset moves by the
    run's first row; a RoPE's table row is loaded again for each run). ``None`` if one row does not fit."""
    table = plan.table_words
    per_row = (plan.operands + 1 - int(in_place)) * plan.words if not table else 2 * plan.words
    rows = min((avail - table) // per_row, plan.qrows, _WORDS_MAX // plan.words, MAX_ROWS)
    if rows < 1:
        return None
    if pipeline:
        rows = min(rows, -(-plan.rows // PIPELINE_CHUNKS))
    out: list[_Chunk] = []
    for period in range(plan.rows // plan.qrows):
        for a in range(0, plan.qrows, rows):
            c = min(rows, plan.qrows - a)
            first = (period * plan.qrows + a) * plan.words
            x = _Move("x0", first, 1, c * plan.words, c * plan.words)
            moves: tuple[_Move, ...] = (x, _Move("y0", period * table, 1, table, table),
                                        dataclasses.replace(x, name="z0")) if table \
                else (x, dataclasses.replace(x, name="y0"), dataclasses.replace(x, name="z0")) if plan.operands == 2 \
                else (x, dataclasses.replace(x, name="z0"))
            regs = params if table else (*params[:5], params[5] + a, *params[6:])  # the mask's offset
            out.append((moves, dataclasses.replace(plan, rows=c, qrows=c, run_rows=0), regs))
    return out


def _chunks(plan: VectorPlan, params: tuple[int, ...], avail: int, pipeline: bool,
            in_place: bool = False) -> list[_Chunk] | None:
    chunks = _unit_chunks(plan, params, avail, pipeline, in_place)
    if chunks is None and plan.pool is not None:
        chunks = _band_chunks(plan, avail, pipeline)
    if chunks is None and plan.qrows > 1:
        chunks = _period_chunks(plan, params, avail, pipeline, in_place)
    return chunks


def vector_op_program(config: ArrayConfig, op: VectorOp) -> GemmProgram:
    """The program of ``op`` alone on ``config`` (module docstring).

    Raises:
        ModelError: the design has no vector unit, the unit cannot run ``op`` (the reason), or one
            unit of it (a row with its output; a pooling's output pixel of one channel word with
            its window) does not fit the ifmap.
    """
    lanes = config.vector_lanes
    plan = vector_plan(op, lanes)
    if isinstance(plan, str):
        raise ModelError(plan)
    floor = (plan.operands * math.prod(op.shape) + math.prod(op.out_shape or op.shape)) * max(1, config.input_bits // 8)
    if floor > DRAM_ADDRESS_BYTES:  # known from the sizes alone, before compiling a program of many chunks
        raise ModelError(f"its operands and output alone take {floor:,} bytes of DRAM, beyond the "
                         f"{DRAM_ADDRESS_BYTES:,} (2**32) a program addresses (dram_addr is 32 bits)")
    whole = _fits_whole(config, op)
    if whole is not None:
        return whole
    steps = chunk_steps(config, plan, vector_registers(op, lanes))
    if isinstance(steps, str):
        raise ModelError(f"{op.kind}: {steps}")
    W = axi_data_bytes(config.rows, config.cols, config.input_bits, config.dram_bytes_per_cycle,
                       config.dataflow is Dataflow.IS)
    build, count = steps
    return _assemble(config, plan, build, W, count)


def chunk_steps(config: ArrayConfig, plan: VectorPlan, regs: VectorRegisters, *, in_place: bool = False,
                pipeline: bool = True) -> tuple[Callable[[dict[str, TensorLayout]], list[Command]], int] | str:
    """The op of ``plan`` (and its registers ``regs``) in chunks over DRAM tensors, as a function of
    where they lie (``x0``, ``y0`` for a second operand or a table, ``z0``: the output, which may be
    ``x0`` itself, an op in place) and its command count, or why one unit does not fit (one line):
    chunks of whole units in the ifmap's two halves taking turns, pipelined, when two chunks fit half
    of it; else one after the other, each filling the ifmap (module docstring; ``vector_op_program``
    runs an op that fits the ifmap whole as one chunk before it asks for these). The tensors' rows are the
    op's rows of ``plan.words`` words (a layout padded to whole words and beats: ``plan`` of its
    stored words), one after another. ``in_place``: an op of one operand and no table whose output
    is its input's shape (a softmax, a norm, an element-wise op; not a pooling) writes its output over
    its input in the ifmap, so a chunk holds twice the rows (``x0`` and ``z0`` then the same tensor).
    ``pipeline=False``: the chunks one after the other, each filling the ifmap, whatever fits."""
    depth = ifmap_words(config)
    in_place = in_place and plan.operands == 1 and plan.pool is None and not plan.table_words
    chunks = _chunks(plan, regs.params, depth // 2, True, in_place) if pipeline else None
    halves = chunks is not None and len(chunks) > 1
    if not halves:
        chunks = _chunks(plan, regs.params, depth, False, in_place)
    if chunks is None:
        unit = op_units(plan)[1]
        what = ("one output pixel's window of one channel word" if plan.pool is not None else
                f"one unit ({', '.join(f'{k}: {v}' for k, v in unit.items())} words)")
        return f"{what} of its operands and output does not fit the design's {depth} ifmap words"
    word_bytes = config.vector_lanes * (config.input_bits // 8)
    held = chunks

    def build(tensors: dict[str, TensorLayout]) -> list[Command]:
        steps = []
        for k, (moves, chunk_plan, params) in enumerate(held):
            base = depth // 2 * (k % 2) if halves else 0
            at: dict[str, int] = {}
            place = []
            for m in moves:  # each tensor's moves one after another in its region (in place: z0 on x0's)
                if in_place and m.name == "z0":
                    at["z0"] = at["x0"]
                    place.append(at["x0"])
                    continue
                at.setdefault(m.name, base)
                place.append(base)
                base += m.rows * m.words

            def move(opcode: int, j: int, wait_vec: int = 0, moves: tuple[_Move, ...] = moves,
                     place: list[int] = place) -> Command:
                m = moves[j]
                return Command.make(opcode, wait_vec=wait_vec, buffer=Buffer.IFMAP,
                                    dram_addr=tensors[m.name].base + m.offset * word_bytes,
                                    dram_stride=m.stride * word_bytes, rows=m.rows, words=m.words,
                                    buf_addr=place[j], row_step=m.words, word_step=1)

            loads = [move(Opcode.LOAD, j, wait_vec=int(j == 0)) for j in range(len(moves) - 1)]
            regs_k = VectorRegisters(chunk_plan, regs.kind, at["x0"], at.get("y0", at["x0"]), at["z0"], params)
            steps.append((loads, [vector_commands(regs_k, wait_dma=1)], move(Opcode.STORE, len(moves) - 1, wait_vec=1)))
        if halves:
            return pipelined(steps)
        return [c for loads, vector, store in steps for c in (*loads, *vector[0], store)]

    return build, sum(len(moves) + 2 * chunk_plan.runs for moves, chunk_plan, _ in chunks)


def _assemble(config: ArrayConfig, plan: VectorPlan, build: Callable[[dict[str, TensorLayout]], list[Command]],
              W: int, count: int) -> GemmProgram:
    """``build``'s ``count`` commands (cut into queue-loads when more than one takes) with the tensors
    placed past them (past a bound of the queue-loads' padding: built once)."""
    shapes = region_shapes(plan, ("x0", "y0", "z0") if plan.operands == 2 else ("x0", "z0"))

    def place(base: int) -> tuple[dict[str, TensorLayout], int]:
        tensors = {}
        for name, (rows, words, n) in shapes.items():
            tensors[name] = t = TensorLayout(name, base, rows, words * plan.lanes, config.input_bits // 8, False,
                                             (rows, n))
            base = -(-(base + t.nbytes) // PAGE) * PAGE
        return tensors, base

    def cut(commands: list[Command]) -> tuple[list[Command], tuple[tuple[int, int], ...]]:
        if len(commands) <= QUEUE_DEPTH:
            return commands, ((0, len(commands)),)
        return _split(commands, QUEUE_DEPTH, queue_entry_commands(W))

    entry = queue_entry_commands(W)
    bound = count if count <= QUEUE_DEPTH else count + (count // (QUEUE_DEPTH // 2) + 1) * entry
    tensors, end = place(-(-(bound + 3) * COMMAND_BYTES // PAGE) * PAGE)
    commands, chunks = cut(build(tensors))
    if len(commands) > bound:
        raise ModelError(f"{plan.kind}: {len(commands)} commands past the {bound} its tensors were placed after")
    return GemmProgram(tuple(commands), tensors, 0, end, W, False, (), chunks)
