"""The compiler's vector side: a :class:`~workloads.vector_ops.VectorOp` as the vector unit's registers.

:func:`vector_registers` gives what one ``start`` of ``rtl_gen.core.vector_unit.VectorUnit`` (one
VECTOR command) takes for ``op`` with its rows at word ``src`` (``src2``: the second operand of an
add, a product or a gated SiLU, or a RoPE's table: ``accel_spec.vector_isa.rope_table_row`` per
position, the position's rows (heads) in ``vqrows``) and its output at ``dst``: the kind's code, the geometry of
:func:`perf_model.vector_timing.vector_plan` and the parameter registers of
:func:`accel_spec.vector_isa.unit_params` (the record's integers and the constants derived from
them, e.g. the exact multiplier of a softmax's ``floor(a / ln 2)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ModelError
from accel_spec.isa import COMMAND_BYTES, QUEUE_DEPTH, Buffer, Command, Opcode, axi_data_bytes
from accel_spec.vector_isa import UNIT_KINDS, VECTOR_CODES, pool_registers, unit_params
from perf_model.compiler.program import PAGE, GemmProgram, TensorLayout, _buffer_depths
from perf_model.vector_timing import MAX_ROWS, MAX_WORDS, VectorPlan, vector_plan
from workloads.vector_ops import VectorOp

__all__ = ["VectorRegisters", "vector_registers", "vector_commands", "vector_program", "ifmap_words",
           "transpose_commands", "region_shapes"]


@dataclass(frozen=True)
class VectorRegisters:
    """One run of the vector unit: its plan, word addresses and parameter registers; ``colmajor``:
    word ``t`` of row ``r`` at ``t * rows + r`` past each base (a GEMM output's ifmap layout)."""

    plan: VectorPlan
    kind: int
    src: int
    src2: int
    dst: int
    params: tuple[int, ...]
    colmajor: int = 0

    def packed_params(self) -> int:
        """The parameter registers as the unit's ``params`` port (32 bits each, register 0 lowest)."""
        return sum((v & 0xFFFFFFFF) << (32 * i) for i, v in enumerate(self.params))


def vector_registers(op: VectorOp, lanes: int, *, src: int = 0, src2: int = 0, dst: int = 0,
                     colmajor: bool = False) -> VectorRegisters:
    """The unit's registers for ``op`` (module docstring).

    Raises:
        ModelError: the unit cannot run ``op`` (the message is :func:`vector_plan`'s reason).
    """
    plan = vector_plan(op, lanes)
    if isinstance(plan, str):
        raise ModelError(plan)
    params = pool_registers(plan.pool) if plan.pool is not None else unit_params(op.kind, dict(op.params), plan.n)
    return VectorRegisters(plan, VECTOR_CODES[op.kind], src, src2, dst, params, int(colmajor))


def vector_commands(regs: VectorRegisters, *, wait_dma: int = 0, wait_run: int = 0,
                    wait_vec: int = 0) -> list[Command]:
    """The ``VECTOR`` command of ``regs`` and its parameter block (the next queue slot); an op of
    more rows than one run takes, a command and block per run (its rows ``r0 ..`` at ``r0 * words``
    past each base; a RoPE's table at ``r0 / qrows`` table rows past ``src2``).

    Raises:
        ModelError: a column-major op of several runs (its rows interleave: not split).
    """
    p = regs.plan
    if p.runs > 1 and regs.colmajor:
        raise ModelError(f"{UNIT_KINDS[regs.kind - 1]}: {p.rows} column-major rows take several runs")
    block = Command.make(Opcode.VECTOR_PARAMS, **{f"vp{i}": v & 0xFFFFFFFF for i, v in enumerate(regs.params)})
    out: list[Command] = []
    for r0, rows in p.run_spans():
        step = r0 * p.words
        step2 = r0 // p.qrows * p.table_words if p.table_words else step
        head = Command.make(Opcode.VECTOR, wait_dma=wait_dma, wait_run=wait_run, wait_vec=wait_vec, vkind=regs.kind,
                            vcolmajor=regs.colmajor, vsrc=regs.src + step, vsrc2=regs.src2 + step2,
                            vdst=regs.dst + step, vrows=rows, vwords=p.words, vn=p.n, vqrows=p.qrows)
        out += [head, block]
    return out


def transpose_commands(lanes: int, rows: int, n: int, *, src: int, dst: int, out_pitch: int = 0, wait_dma: int = 0,
                       wait_vec: int = 0) -> list[Command]:
    """The ``VECTOR`` transposing ``rows`` rows of ``n`` int8 elements (``ceil(n / lanes)`` words a
    row, row-major from ifmap word ``src``) into ``n`` rows of ``rows`` elements from word ``dst``,
    ``out_pitch`` words apart (0: ``ceil(rows / lanes)``), and its parameter block
    (``accel_spec.vector_isa``'s docstring has the op and its cycles).

    Raises:
        ModelError: a geometry outside the unit's registers, or a pitch narrower than an output row.
    """
    words, out_words = -(-n // lanes), -(-rows // lanes)
    pitch = out_pitch or out_words
    if not 1 <= rows <= MAX_ROWS or not 1 <= n < 1 << 24 or words > MAX_WORDS:
        raise ModelError(f"transpose: {rows} rows of {n} elements exceed the unit's {MAX_ROWS} rows and "
                         f"{(1 << 24) - 1} elements a row")
    if not out_words <= pitch < 1 << 24:
        raise ModelError(f"transpose: an output row pitch of {pitch} words does not hold {rows} elements "
                         f"({out_words} words of {lanes} lanes)")
    head = Command.make(Opcode.VECTOR, wait_dma=wait_dma, wait_vec=wait_vec, vkind=VECTOR_CODES["transpose"],
                        vsrc=src, vsrc2=src, vdst=dst, vrows=rows, vwords=words, vn=n, vqrows=1)
    return [head, Command.make(Opcode.VECTOR_PARAMS, vp0=pitch)]


def ifmap_words(config: ArrayConfig) -> int:
    """Words of ``config``'s ifmap buffer (where the vector unit's operands and results live)."""
    return _buffer_depths(config)[0]


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


def region_shapes(plan: VectorPlan, names: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """Each of one op's regions ``names`` (``x..``, ``y..``, ``z..``: first operand, second operand or
    table, output) as DRAM rows of whole words: ``(rows, words a row, elements a row)``; a pooling's
    rows are pixels of ``words_c`` words (NHWC), its output's the pooled image's; a RoPE's ``y`` its
    table, a row a position."""
    lanes, g = plan.lanes, plan.pool
    shapes: dict[str, tuple[int, int, int]] = {}
    for name in names:
        if name[0] == "y" and plan.table_words:
            shapes[name] = (plan.table_rows, plan.table_words, plan.table_words * lanes)
        elif g is None:
            shapes[name] = (plan.rows, plan.words, plan.n)
        else:
            pixels = g.out_h * g.out_w if name[0] == "z" else g.in_h * g.in_w
            shapes[name] = (plan.rows * pixels, g.words_c, plan.n)
    return shapes


def vector_program(config: ArrayConfig, ops: Sequence[VectorOp]) -> GemmProgram:
    """Vector ops on chip as one program: for each op ``i``, ``LOAD`` its operands (``x{i}``, and
    ``y{i}`` for a two-operand op; rows of ``n`` elements (int8, or the codes of the design's
    activation format, which the unit's door converts: ``accel_spec.vector_door``; 2 bytes each in
    a bf16 design) padded to whole words, DRAM rows of whole words; a pooling's rows are its NHWC
    pixels; a RoPE's ``y{i}`` is its table, one
    row of ``2 n`` codes per position, :func:`accel_spec.vector_isa.rope_table_row`) into the ifmap
    and ``VECTOR`` once they are in (``wait_dma``; the next op's loads overlap it); then ``STORE`` every output ``z{i}``
    from the ifmap once the unit is done (``wait_vec``). Each operand and output has a region of its own in the ifmap.

    Raises:
        ModelError: the design has no vector unit, the unit cannot run an op (the reason), or the
            regions do not fit the ifmap buffer together.
    """
    lanes = config.vector_lanes
    plans = []
    for op in ops:
        plan = vector_plan(op, lanes)
        if isinstance(plan, str):
            raise ModelError(plan)
        plans.append(plan)
    regions = [(f"x{i}", f"y{i}", f"z{i}") if p.operands == 2 else (f"x{i}", f"z{i}") for i, p in enumerate(plans)]
    shapes: dict[str, tuple[int, int, int]] = {}
    for plan, names in zip(plans, regions, strict=True):
        shapes |= region_shapes(plan, names)
    at: dict[str, int] = {}
    top = 0
    for name, (rows, words, _) in shapes.items():
        at[name] = top
        top += rows * words
    depth = ifmap_words(config)
    if top > depth:
        raise ModelError(f"vector ops: their operands and outputs take {top} ifmap words, the design has {depth}")
    W = axi_data_bytes(config.rows, config.cols, config.input_bits, config.dram_bytes_per_cycle,
                       config.dataflow is Dataflow.IS)
    count = sum(len(names) - 1 + 2 * plan.runs + 1 for plan, names in zip(plans, regions, strict=True))
    base = _align((count + 3) * COMMAND_BYTES, PAGE)
    tensors: dict[str, TensorLayout] = {}
    for name, (rows, words, n) in shapes.items():
        t = TensorLayout(name, base, rows, words * lanes, config.input_bits // 8, False, (rows, n))  # bf16: 2 bytes
        tensors[name] = t
        base = _align(base + t.nbytes, PAGE)

    def transfer(opcode: int, name: str, **waits: int) -> Command:
        t = tensors[name]
        rows, words, _ = shapes[name]
        return Command.make(opcode, **waits, buffer=Buffer.IFMAP, dram_addr=t.base, dram_stride=t.pitch,
                            rows=rows, words=words, buf_addr=at[name], row_step=words, word_step=1)

    cmds: list[Command] = []
    for i, (op, names) in enumerate(zip(ops, regions, strict=True)):
        cmds += [transfer(Opcode.LOAD, name) for name in names[:-1]]
        regs = vector_registers(op, lanes, src=at[f"x{i}"], src2=at.get(f"y{i}", at[f"x{i}"]), dst=at[f"z{i}"])
        cmds += vector_commands(regs, wait_dma=1)
    cmds += [transfer(Opcode.STORE, f"z{i}", wait_vec=int(i == 0)) for i in range(len(plans))]
    if len(cmds) > QUEUE_DEPTH:
        raise ModelError(f"vector ops: {len(cmds)} commands do not fit one queue-load of {QUEUE_DEPTH}")
    return GemmProgram(tuple(cmds), tensors, 0, base, W, False, (), ((0, len(cmds)),))
