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
  * an image of a pooling (its input and pooled output);
  * a position of a RoPE: its ``qrows`` rows (heads) and its table row.

  When two chunks fit the ifmap, the op is cut into at least
  :data:`perf_model.compiler.network.PIPELINE_CHUNKS` chunks taking turns in the ifmap's two halves,
  ordered by :func:`perf_model.compiler.network.pipelined` (the next chunk loads while the unit
  runs this one, as a conv network's DRAM links do); else the chunks run one after the other, each
  filling the ifmap. A program longer than one queue-load runs as several
  (``perf_model.compiler.network._split``; the ifmap keeps its contents between them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

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

__all__ = ["vector_op_program", "op_units"]


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


def vector_op_program(config: ArrayConfig, op: VectorOp) -> GemmProgram:
    """The program of ``op`` alone on ``config`` (module docstring).

    Raises:
        ModelError: the design has no vector unit, the unit cannot run ``op`` (the reason), or one
            unit of it (a row, an image, a position or a causal period, with its output) does not
            fit the ifmap.
    """
    lanes = config.vector_lanes
    plan = vector_plan(op, lanes)
    if isinstance(plan, str):
        raise ModelError(plan)
    whole = _fits_whole(config, op)
    if whole is not None:
        return whole
    units, unit = op_units(plan)
    per_unit = sum(unit.values())
    depth = ifmap_words(config)
    halves = units > 1 and depth // 2 // per_unit >= 1
    room = min((depth // 2 if halves else depth) // per_unit, _WORDS_MAX // max(unit.values()))
    if room < 1:
        what = "a word" if unit["x0"] == 1 else f"one unit ({', '.join(f'{k}: {v}' for k, v in unit.items())} words)"
        raise ModelError(f"{op.kind}: {what} of its operands and output takes {per_unit} ifmap words, the design "
                         f"has {depth}")
    per = min(-(-units // PIPELINE_CHUNKS) if halves else units, room)
    regs = vector_registers(op, lanes)
    W = axi_data_bytes(config.rows, config.cols, config.input_bits, config.dram_bytes_per_cycle,
                       config.dataflow is Dataflow.IS)
    word_bytes = lanes * (config.input_bits // 8)

    def build(tensors: dict[str, TensorLayout]) -> list[Command]:
        steps = []
        for k, u0 in enumerate(range(0, units, per)):
            count = min(per, units - u0)
            base = depth // 2 * (k % 2) if halves else 0
            at: dict[str, int] = {}
            for name, words in unit.items():
                at[name] = base
                base += per * words

            def move(opcode: int, name: str, wait_vec: int = 0, u0: int = u0, count: int = count,
                     at: dict[str, int] = at) -> Command:
                words = count * unit[name]
                return Command.make(opcode, wait_vec=wait_vec, buffer=Buffer.IFMAP,
                                    dram_addr=tensors[name].base + u0 * unit[name] * word_bytes,
                                    dram_stride=words * word_bytes, rows=1, words=words, buf_addr=at[name],
                                    row_step=words, word_step=1)

            loads = [move(Opcode.LOAD, name, wait_vec=int(i == 0)) for i, name in enumerate(unit) if name != "z0"]
            chunk = VectorRegisters(_chunk_plan(plan, u0, count), regs.kind, at["x0"], at.get("y0", at["x0"]),
                                    at["z0"], regs.params)
            steps.append((loads, [vector_commands(chunk, wait_dma=1)], move(Opcode.STORE, "z0", wait_vec=1)))
        if halves:
            return pipelined(steps)
        return [c for loads, vector, store in steps for c in (*loads, *vector[0], store)]

    return _assemble(config, plan, build, W)


def _assemble(config: ArrayConfig, plan: VectorPlan, build: Callable[[dict[str, TensorLayout]], list[Command]],
              W: int) -> GemmProgram:
    """``build``'s commands (cut into queue-loads when longer than one) with the tensors placed past them."""
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

    count = len(cut(build(place(0)[0]))[0])
    tensors, end = place(-(-(count + 3) * COMMAND_BYTES // PAGE) * PAGE)
    commands, chunks = cut(build(tensors))
    return GemmProgram(tuple(commands), tensors, 0, end, W, False, (), chunks)
