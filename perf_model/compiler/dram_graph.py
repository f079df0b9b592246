"""One program from GEMM programs and vector steps over tensors in DRAM (a transformer block's assembly).

A block (``perf_model.compiler.encoder``, ``perf_model.compiler.decoder``) is a list of parts run in
order, with no host step between them:

* a :class:`GemmPart`: one GEMM's ``perf_model.compiler.program.compile_gemm`` program, its LOADs
  and STOREs of some of its own tensors re-addressed to :class:`Slice` s of the block's tensors
  (:func:`moved`: a band of rows and columns read or written with the whole tensor's row pitch);
  its other tensors (weights, output-stage parameters) are its own, shared by the parts of one
  ``tag`` (e.g. a GEMM's heads);
* a :class:`StepPart`: commands built from the placed tensors: the vector unit over bands of a
  tensor's rows (:func:`row_steps`, :func:`softmax_steps`) or a transpose (:func:`transpose_steps`),
  each band LOADed into the ifmap, run (``VECTOR``, ``wait_dma``) and STOREd back (``wait_vec``).

The DMA engine runs one transfer at a time in program order, so a part's loads follow the stores
they read. :func:`assemble` places the block's tensors, then each tag's own tensors, past the
program, and cuts it into queue-loads of ``QUEUE_DEPTH`` commands
(``perf_model.compiler.network._split``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ModelError
from accel_spec.isa import COMMAND_BYTES, QUEUE_DEPTH, Buffer, Command, Opcode, queue_entry_commands
from accel_spec.vector_door import moves_byte_lanes
from perf_model.compiler.network import _split
from perf_model.compiler.program import PAGE, GemmProgram, TensorLayout, _buffer_depths
from perf_model.compiler.vector import VectorRegisters, transpose_commands, vector_commands, vector_registers
from perf_model.program_timing import dram_rate, program_cycles
from perf_model.vector_timing import vector_plan
from workloads.ops import Workload
from workloads.vector_ops import VectorOp

__all__ = ["Slice", "GemmPart", "StepPart", "moved", "assemble", "row_steps", "softmax_steps", "transpose_steps",
           "like", "key_columns", "require_block_design", "ops_after", "attention_layouts", "attention_parts"]


@dataclasses.dataclass(frozen=True)
class Slice:
    """Where a GEMM's own tensor lives in the block: rows from ``row`` and elements from ``col`` of ``tensor``."""

    tensor: str
    row: int = 0
    col: int = 0


@dataclasses.dataclass(frozen=True)
class GemmPart:
    """A GEMM's program with its sliced tensors; parts of one ``tag`` share their other tensors
    (named ``{name}{tag}``, or ``{tag}{name}`` when the tag ends with ``.``)."""

    program: GemmProgram
    slices: dict[str, Slice]
    tag: str


@dataclasses.dataclass(frozen=True)
class StepPart:
    """Commands built from the placed tensors."""

    build: Callable[[dict[str, TensorLayout]], list[Command]]


def like(layout: TensorLayout, name: str, rows: int | None = None, row_elems: int | None = None,
         cols: int | None = None) -> TensorLayout:
    """``layout`` renamed, with ``rows`` rows of ``cols`` elements, stored ``row_elems`` a row, when given."""
    rows = layout.rows if rows is None else rows
    elems = layout.row_elems if row_elems is None else row_elems
    cols = layout.shape[1] if cols is None else cols
    return dataclasses.replace(layout, name=name, rows=rows, row_elems=elems, shape=(rows, cols))


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


def require_block_design(config: ArrayConfig, what: str) -> None:
    """Raise unless ``config`` can run ``what`` (e.g. "an encoder layer") as one program: the vector
    unit, and a weight-stationary array (a head's operands are column bands of row-major tensors).

    Raises:
        ModelError: the design has no vector unit, another dataflow, or 16-bit lanes (no transpose).
    """
    if not config.vector_lanes:
        raise ModelError(f"design {config.short_name()} has no vector unit (vector_unit = false)")
    if config.dataflow is not Dataflow.WS:
        raise ModelError(f"{what} as one program needs a weight-stationary array (a head's operands are "
                         f"column bands of row-major tensors), not {config.dataflow.value.upper()}")
    if not moves_byte_lanes(config.input_bits):
        raise ModelError(f"{what} as one program transposes its keys on the vector unit, whose tile holds bytes, "
                         f"not the {config.input_bits}-bit lanes of {config.act_fmt.name} activations")


def ops_after(workload: Workload) -> dict[int, list[VectorOp]]:
    """``workload``'s vector ops by the number of matrix ops before them (``Workload.vector_after``)."""
    after = workload.vector_after or (len(workload.ops),) * len(workload.vector_ops)
    by: dict[int, list[VectorOp]] = {}
    for vop, where in zip(workload.vector_ops, after, strict=True):
        by.setdefault(where, []).append(vop)
    return by


def key_columns(config: ArrayConfig, keys: int, seqs: int, bus: int) -> int:
    """Columns of ``K^T`` from one sequence's keys to the next's: ``keys``, or, with several
    sequences, ``keys`` rounded up to whole words and bus beats (a sequence's transposed band is
    stored from a column on the bus)."""
    return keys if seqs == 1 else _align(keys, math.lcm(config.vector_lanes, bus))


def _rebase(cmd: Command, own: TensorLayout, at: TensorLayout, where: Slice, bus: int) -> Command:
    """``cmd`` (a LOAD or STORE of ``own``) moved to ``where`` in ``at``, keeping its rows and words."""
    off = cmd["dram_addr"] - own.base
    row, byte = divmod(off, own.pitch)
    if cmd["rows"] > 1 and cmd["dram_stride"] != own.pitch:
        raise ModelError(f"a transfer of {own.name} steps {cmd['dram_stride']} bytes a row, not its pitch {own.pitch}")
    addr = at.base + (where.row + row) * at.pitch + int(where.col * at.elem_size) + byte
    if addr % bus or at.pitch % bus:
        raise ModelError(f"a slice of {at.name} at byte {addr} (pitch {at.pitch}) is not on the {bus}-byte bus")
    fields = tuple((k, addr if k == "dram_addr" else at.pitch if k == "dram_stride" else v) for k, v in cmd.fields)
    return dataclasses.replace(cmd, fields=fields)


def moved(program: GemmProgram, slices: dict[str, Slice], tensors: dict[str, TensorLayout], shift: int,
          bus: int) -> list[Command]:
    """``program``'s commands with transfers of its sliced tensors re-addressed, the others shifted by ``shift``.

    Raises:
        ModelError: a slice outside its tensor, of another element type, or off the bus.
    """
    own = program.tensors
    for name, where in slices.items():
        t, at = own[name], tensors[where.tensor]
        if (t.elem_bytes, t.packed) != (at.elem_bytes, at.packed) or where.row + t.rows > at.rows \
                or int(where.col * at.elem_size) + t.pitch > at.pitch:
            raise ModelError(f"{t.rows} rows of {t.row_elems} elements do not fit {at.name} ({at.rows} rows of "
                             f"{at.row_elems}) at row {where.row}, element {where.col}")
    out = []
    for cmd in program.commands:
        if cmd.opcode in (Opcode.LOAD, Opcode.STORE):
            addr = cmd["dram_addr"]
            hit = next((n for n in slices if own[n].base <= addr < own[n].base + own[n].nbytes), None)
            if hit is not None:
                cmd = _rebase(cmd, own[hit], tensors[slices[hit].tensor], slices[hit], bus)
            else:
                cmd = dataclasses.replace(cmd, fields=tuple((k, v + shift if k == "dram_addr" else v)
                                                            for k, v in cmd.fields))
        out.append(cmd)
    return out


def assemble(net: dict[str, TensorLayout], parts: Sequence[GemmPart | StepPart], bus: int,
             views: dict[str, tuple[str, TensorLayout]] | None = None) -> GemmProgram:
    """The parts as one program: the block's tensors ``net`` placed first past the program, then each
    GEMM tag's own tensors; cut into queue-loads (module docstring). ``views``: other layouts of some
    of ``net``'s tensors (name -> (the tensor, its bytes as rows of another width)), placed at its base.

    Raises:
        ModelError: a view larger than its tensor.
    """
    gemms = [p for p in parts if isinstance(p, GemmPart)]

    def place(cursor: int) -> tuple[dict[str, TensorLayout], dict[str, int], int]:
        tensors: dict[str, TensorLayout] = {}
        for name, t in net.items():
            tensors[name] = dataclasses.replace(t, base=cursor)
            cursor = _align(cursor + t.nbytes, PAGE)
        for name, (of, t) in (views or {}).items():
            if t.nbytes > net[of].nbytes:
                raise ModelError(f"a view {name} of {t.nbytes} bytes is larger than {of} ({net[of].nbytes} bytes)")
            tensors[name] = dataclasses.replace(t, name=name, base=tensors[of].base)
        shifts: dict[str, int] = {}
        for part in gemms:
            if part.tag in shifts:
                continue
            kept = {n: t for n, t in part.program.tensors.items() if n not in part.slices}
            shift = cursor - min(t.base for t in kept.values())
            for n, t in kept.items():
                name = f"{part.tag}{n}" if part.tag.endswith(".") else f"{n}{part.tag}"
                tensors[name] = dataclasses.replace(t, name=name, base=t.base + shift)
            shifts[part.tag] = shift
            cursor = _align(max(t.base + t.nbytes for t in kept.values()) + shift, PAGE)
        return tensors, shifts, cursor

    def emit(tensors: dict[str, TensorLayout], shifts: dict[str, int]) -> list[Command]:
        commands: list[Command] = []
        for part in parts:
            if isinstance(part, GemmPart):
                commands += moved(part.program, part.slices, tensors, shifts[part.tag], bus)
            else:
                commands += part.build(tensors)
        return commands

    entry = queue_entry_commands(bus)
    draft, draft_shifts, _ = place(0)
    length = len(_split(emit(draft, draft_shifts), QUEUE_DEPTH, entry)[0])
    tensors, shifts, end = place(_align(length * COMMAND_BYTES, PAGE))
    commands, chunks = _split(emit(tensors, shifts), QUEUE_DEPTH, entry)
    runs = tuple(r for p in gemms for r in p.program.runs)
    return GemmProgram(tuple(commands), tensors, 0, end, bus, True, runs, chunks)


def _transfer(opcode: int, t: TensorLayout, row: int, rows: int, words: int, region: int, byte: int = 0,
              row_step: int | None = None) -> Command:
    """A LOAD (STORE) of ``rows`` rows of ``t`` from ``row`` (``byte`` into each), ``words`` words a
    row, into (from) the ifmap region at word ``region``, row-major (``row_step`` words apart)."""
    return Command.make(opcode, wait_vec=1, buffer=Buffer.IFMAP, dram_addr=t.base + row * t.pitch + byte,
                        dram_stride=t.pitch, rows=rows, words=words, buf_addr=region,
                        row_step=words if row_step is None else row_step, word_step=1)


def _bands(total: int, per: int, period: int = 0) -> list[tuple[int, int]]:
    """``(first, count)`` bands of at most ``per`` of ``total`` rows, none crossing a multiple of ``period``."""
    out = []
    r = 0
    while r < total:
        end = min(total, r + per)
        if period:
            end = min(end, (r // period + 1) * period)
        out.append((r, end - r))
        r = end
    return out


def _stored_words(regs: VectorRegisters, words: int) -> VectorRegisters:
    """``regs`` over rows of ``words`` words, as a tensor stores them (a row's words past its elements,
    padding of a layout wider than the row: the unit treats their lanes as past ``n`` and writes 0)."""
    return dataclasses.replace(regs, plan=dataclasses.replace(regs.plan, words=words))


def row_steps(config: ArrayConfig, op: VectorOp, inputs: Sequence[tuple[str, int]], out: tuple[str, int],
              rows: int, *, period: int = 0, table: str | None = None) -> StepPart:
    """``op`` (a ``rmsnorm``/``layernorm`` over each row, an element-wise op of one or two operands,
    or a ``rope`` over each row's heads) on ``rows`` rows of the input tensors (``(tensor, first
    row)``) into ``out``, in bands that fit the ifmap. A band does not cross a multiple of
    ``period`` rows (a sequence: a RoPE's positions restart); a RoPE reads its ``table`` tensor's
    row ``r % period`` (of ``period``, or of all rows) for row ``r``.

    Raises:
        ModelError: the unit cannot run the op, or one row of it does not fit the ifmap.
    """
    lanes = config.vector_lanes
    depth = _buffer_depths(config)[0]

    def shaped(count: int, n: int, words: int, heads: int) -> VectorOp:
        """``op`` over a band of ``count`` rows (``n`` elements, ``words`` words each)."""
        if op.kind == "rope":
            return dataclasses.replace(op, shape=(1, count, heads, n // heads), out_shape=None)
        if op.kind in ("rmsnorm", "layernorm"):
            return dataclasses.replace(op, shape=(count, n), out_shape=None, axis=1)
        # element-wise over whole words: a row's padding lanes are zeros, which these kinds map to zero
        return dataclasses.replace(op, shape=(count * words * lanes,), out_shape=None)

    def build(tensors: dict[str, TensorLayout]) -> list[Command]:
        first = tensors[inputs[0][0]]
        if first.row_elems % lanes:
            raise ModelError(f"{op.kind}: a row of {first.name} ({first.row_elems} elements) is not whole words of "
                             f"{lanes} lanes")
        words, n = first.row_elems // lanes, first.shape[1]
        heads = op.shape[2] if op.kind == "rope" else 1
        if op.kind == "rope" and words * lanes != n:
            raise ModelError(f"rope: a row of {first.name} is stored {first.row_elems} elements wide, not its {n}: "
                             "its heads are not consecutive rows of whole words")
        one = vector_plan(shaped(1, n, words, heads), lanes)
        if isinstance(one, str):
            raise ModelError(one)
        table_words = one.table_words
        # a band of c rows takes c words a row per operand and output, and (a RoPE) the table's span
        # the sequencer checks: rope_table_span(c heads, dh words, heads) = c * extra + fixed words
        extra, fixed = (words * (2 if heads == 1 else 1), 2 * one.words) if table else (0, 0)
        per = min((depth - fixed) // (words * (len(inputs) + 1) + extra), ((1 << 24) - 1) // (words * lanes))
        cut = words  # words of a row a band takes: all, or (an element-wise op of rows too long) a piece
        if per < 1 and op.kind not in ("rope", "rmsnorm", "layernorm"):
            per, cut = 1, depth // (len(inputs) + 1)
        if per < 1 or cut < 1:
            raise ModelError(f"{op.kind}: a row of {words} words and its operands do not fit the ifmap ({depth} words)")
        cmds: list[Command] = []
        for r0, count in _bands(rows, per, period):
            for w0 in range(0, words, cut):
                piece = min(cut, words - w0)
                regions = [i * count * piece for i in range(len(inputs) + 1)]
                for (name, row), region in zip(inputs, regions, strict=False):
                    cmds.append(_transfer(Opcode.LOAD, tensors[name], row + r0, count, piece, region, byte=w0 * lanes))
                src2 = regions[1] if len(inputs) > 1 else regions[0]
                if table is not None:
                    src2 = regions[-1] + count * words
                    cmds.append(_transfer(Opcode.LOAD, tensors[table], r0 % (period or rows), count, table_words,
                                          src2))
                regs = vector_registers(shaped(count, n, piece, heads), lanes, src=regions[0], src2=src2,
                                        dst=regions[len(inputs)])
                if op.kind in ("rmsnorm", "layernorm"):
                    regs = _stored_words(regs, words)
                cmds += vector_commands(regs, wait_dma=1)
                cmds.append(_transfer(Opcode.STORE, tensors[out[0]], out[1] + r0, count, piece, regions[len(inputs)],
                                      byte=w0 * lanes))
        return cmds

    return StepPart(build)


def softmax_steps(config: ArrayConfig, softmax: VectorOp, scores: str, instances: int, queries: int,
                  keys: int) -> StepPart:
    """The softmax in place over every row of tensor ``scores`` (``instances * queries`` rows of
    ``keys`` scores, stored in whole words: a block pads the scores' rows to words and beats, the
    GEMMs' transfers keep their own row bytes), in the chunks the softmax's own program runs
    (``vector_chunks.chunk_steps``: whole rows, or a causal mask's whole query periods, in the ifmap's
    two halves taking turns and pipelined when two chunks fit; a period that does not fit in runs
    of its rows, the mask's offset moved to each run's first row), each written over its input in
    the ifmap (twice the rows a chunk of the own program holds: its output in a region of its own);
    pipelined or not, whichever walks fewer cycles.

    Raises:
        ModelError: one row (a causal softmax: one row of a period) with its output does not fit the ifmap.
    """
    from perf_model.compiler.vector_chunks import chunk_steps

    lanes = config.vector_lanes
    shaped = dataclasses.replace(softmax, shape=(instances, queries, keys), out_shape=(instances, queries, keys),
                                 axis=2)

    chosen: dict[tuple[int, int], bool] = {}  # pipelined or not, by where the scores lie in their page

    def build(tensors: dict[str, TensorLayout]) -> list[Command]:
        s = tensors[scores]
        if s.row_elems % lanes or s.pitch * 8 != s.row_elems * config.input_bits:
            raise ModelError(f"a score row of {s.row_elems} elements ({s.pitch} bytes) is not whole words of "
                             f"{lanes} lanes of {config.input_bits} bits")
        regs = _stored_words(vector_registers(shaped, lanes), s.row_elems // lanes)
        where = (s.base % PAGE, s.pitch)  # (a program is placed twice, its tensors whole pages apart)
        ways = [chunk_steps(config, regs.plan, regs, in_place=True, pipeline=p) for p in (True, False)
                if chosen.get(where, p) == p]
        built = [w[0]({"x0": s, "z0": s}) for w in ways if not isinstance(w, str)]
        if not built:
            raise ModelError(f"the softmax over {scores}: {ways[0]}")
        if len(built) == 1 or built[0] == built[1]:
            return built[0]
        # pipelined chunks or chunks filling the ifmap: the one whose commands walk fewer cycles (a few
        # rows run faster whole than in chunks that each pay the DRAM latency)
        rate = dram_rate(config)
        walks = [program_cycles(config, cmds, rate=rate).total for cmds in built]
        chosen[where] = walks[0] <= walks[1]
        return built[0] if chosen[where] else built[1]

    return StepPart(build)


def transpose_steps(config: ArrayConfig, src: str, src_row: int, rows: int, dst: str, dst_col: int,
                    bus: int) -> StepPart:
    """``rows`` rows of tensor ``src`` from ``src_row`` transposed into the columns ``dst_col ..`` of
    tensor ``dst`` (one ``dst`` row per ``src`` column), in bands of ``src`` rows that fit the ifmap
    (when a band of a bus beat's rows does not, in pieces of their words): LOAD the band, one
    transpose (``accel_spec.vector_isa``) into a region of its own, STORE the band's columns. A band
    is a whole number of bus beats of columns (its STORE starts on the bus).

    Raises:
        ModelError: ``dst_col`` off the bus, or one band does not fit the ifmap.
    """
    lanes = config.vector_lanes

    def build(tensors: dict[str, TensorLayout]) -> list[Command]:
        s, d = tensors[src], tensors[dst]
        if s.row_elems % lanes:
            raise ModelError(f"transpose: a row of {src} ({s.row_elems} elements) is not whole words of {lanes} lanes")
        words, n = s.row_elems // lanes, s.shape[1]
        depth = _buffer_depths(config)[0]
        step = math.lcm(lanes, bus)
        per = int(depth // (words + n / lanes)) // step * step  # rows of a band: its input and output words
        cut = words  # words of a row a band takes: all, or (rows too long for a band of step rows) a piece
        if per < 1:
            per, cut = step, depth // (2 * step)
        if cut < 1:
            raise ModelError(f"transpose: {step} rows of one word and their transposed rows do not fit the ifmap "
                             f"({depth} words)")
        if (dst_col * int(d.elem_size)) % bus or d.pitch % bus:
            raise ModelError(f"transpose: column {dst_col} of {dst} is not on the {bus}-byte bus")
        out: list[Command] = []
        for r0, count in _bands(rows, per):
            out_words = -(-count // lanes)
            for w0 in range(0, words, cut):
                piece = min(cut, words - w0)
                elems = min(piece * lanes, n - w0 * lanes)  # the piece's columns: rows of the output
                region = count * piece
                out += [_transfer(Opcode.LOAD, s, src_row + r0, count, piece, 0, byte=w0 * lanes),
                        *transpose_commands(lanes, count, elems, src=0, dst=region, wait_dma=1),
                        _transfer(Opcode.STORE, d, w0 * lanes, elems, out_words, region, byte=dst_col + r0)]
        return out

    return StepPart(build)


def attention_layouts(config: ArrayConfig, scores: GemmProgram, d_model: int, seqs: int, heads: int, queries: int,
                      keys: int) -> tuple[dict[str, TensorLayout], int]:
    """The attention's ``KT`` (``d_model`` rows; sequence ``b``'s keys from column ``b kc``,
    :func:`key_columns`) and ``S`` (``seqs heads queries`` rows of ``keys`` scores, stored in whole
    words and beats) as one head's scores GEMM ``scores`` lays out its ``B`` and ``C``, and ``kc``."""
    bus = scores.data_bytes
    step = math.lcm(config.vector_lanes, bus)
    b, c = scores.tensors["b"], scores.tensors["c"]
    kc = key_columns(config, keys, seqs, bus)
    return {"KT": like(b, "KT", d_model, _align((seqs - 1) * kc + b.row_elems, step), (seqs - 1) * kc + keys),
            "S": like(c, "S", seqs * heads * queries, _align(c.row_elems, step), keys)}, kc


def attention_parts(config: ArrayConfig, gemm: Callable[[int, dict[str, Slice]], list[GemmPart]],
                    softmax: VectorOp, seqs: int, heads: int, queries: int, keys: int, d_head: int, kc: int,
                    bus: int, first_key: int = 0, kv_heads: int = 0,
                    per_head: tuple[str, str] | None = None) -> list[GemmPart | StepPart]:
    """Attention over the block's ``Q``, ``K`` and ``V`` (``seqs keys`` rows of each sequence's keys
    and values) into ``ctx``: each sequence's keys from ``first_key`` transposed into ``KT`` (the
    columns before it are already there: a KV cache's), per sequence ``b`` and head ``h`` the scores
    GEMM (``gemm(3, slices)``: its ``Q`` and ``KT`` bands into ``S``'s rows ``(b heads + h)
    queries``), the softmax over ``S``, and the context GEMM (``gemm(4, slices)``: ``S``'s rows and
    ``V``'s band into ``ctx``'s). ``kv_heads`` key/value heads (0: ``heads``) each serve a group of
    ``heads / kv_heads`` query heads: head ``h`` reads key/value head ``h // group``'s bands.

    ``per_head``: views of ``Q`` and ``ctx`` as one row a head (``seqs heads`` rows of ``d_head``, one
    query a sequence): then one scores and one context GEMM a group, over its heads' rows (the
    group's keys and values loaded once for all its query heads; ``gemm(3/4, ...)`` compiled for
    ``group`` rows), else one a head."""
    group = heads // (kv_heads or heads)
    rows = group if per_head else 1  # query heads one GEMM serves
    if per_head and queries != 1:
        raise ModelError(f"a GEMM over a group's query heads needs one query a sequence, not {queries}")
    units = [(b, h) for b in range(seqs) for h in range(0, heads, rows)]  # (sequence, the GEMM's first head)

    def query(tensor: int, b: int, h: int) -> Slice:
        """The operand band of ``Q`` (``tensor`` 0) or ``ctx`` (1) a GEMM from head ``h`` reads or writes."""
        if per_head:
            return Slice(per_head[tensor], b * heads + h)
        return Slice(("Q", "ctx")[tensor], b * queries, h * d_head)

    parts: list[GemmPart | StepPart] = [
        transpose_steps(config, "K", b * keys + first_key, keys - first_key, "KT", b * kc + first_key, bus)
        for b in range(seqs)]
    parts += [p for b, h in units for p in gemm(3, {"a": query(0, b, h),
                                                     "b": Slice("KT", h // group * d_head, b * kc),
                                                     "c": Slice("S", (b * heads + h) * queries)})]
    parts.append(softmax_steps(config, softmax, "S", seqs * heads, queries, keys))
    parts += [p for b, h in units for p in gemm(4, {"a": Slice("S", (b * heads + h) * queries),
                                                     "b": Slice("V", b * keys, h // group * d_head),
                                                     "c": query(1, b, h)})]
    return parts
