"""One program for a transformer encoder layer: the attention heads, the softmax, the FFN and the norms.

The layer (BERT's; the ``bert_base`` builtin), on an input ``x`` of ``T`` tokens of ``D`` int8
channels, ``H`` heads of ``dh = D / H`` channels, every GEMM requantised by the output stage::

    Q = x Wq        K^T = Wk^T x^T        V = x Wv
    S_h = Q_h K_h^T            (per head: T x dh x T)
    P = softmax(S)             (per row of S, the vector unit)
    ctx_h = P_h V_h            (per head: T x T x dh, into columns h dh .. of ctx)
    out = LN(add(F2, h1)),  F2 = gelu(h1 W1) W2,  h1 = LN(add(ctx Wo, x))

The scores need ``K_h^T`` as their ``B`` operand, a transpose no GEMM output gives in a
weight-stationary layout (``C`` and ``A`` hold a token's channels in a row, ``B`` a channel's
tokens), and the design has no transpose unit. So the key GEMM computes ``K^T`` itself, ``Wk^T
x^T`` (``D x D x T``): its ``A`` is the key weights transposed (a constant the host lays out, as
any weight) and its ``B`` is the layer's input transposed, which the host writes beside ``x``
(the layer's input is the network's input, the one tensor the host provides). Its output stage
then quantises per token instead of per channel, so the key GEMM must have one requantisation
parameter set (per tensor), as the builtins' have. A layer whose input came from an earlier
layer on chip would need the transpose on chip: not built.

Every tensor of the attention goes through DRAM, inside the one program: a head's operands are
slices of the ``Q``, ``K^T`` and ``V`` tensors (a column band of ``Q`` and ``V``, read with their
row pitch; a band of rows of ``K^T``), its scores are rows of one tensor ``S`` of all heads, the
softmax runs on ``S`` in ifmap chunks of whole heads (LOAD, VECTOR, STORE in place), and each
context head stores into its column band of ``ctx``. The output projection, the residual adds,
the norms and the FFN are one chain (``perf_model.compiler.network.compile_network``: on chip
where the live tensors fit the ifmap), reading ``ctx`` and, for the first add, ``x``.

Each GEMM is ``perf_model.compiler.program.compile_gemm``'s program; its LOADs and STOREs are
re-addressed from the GEMM's own tensors to the slices (:func:`_rebase`). The DMA engine runs one
transfer at a time in program order, so a GEMM's loads follow the stores they read. The whole
program runs as consecutive queue-loads of ``QUEUE_DEPTH`` commands
(``perf_model.compiler.network._split``); total cycles are
``perf_model.program_timing.gemm_program_cycles`` of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from accel_dse.commands import COMMAND_BYTES, QUEUE_DEPTH, Buffer, Command, Opcode, queue_entry_commands
from accel_dse.config import ArrayConfig, Dataflow
from accel_dse.errors import ModelError
from perf_model.compiler.network import EXTERNAL, _split, compile_network
from perf_model.compiler.program import PAGE, GemmProgram, TensorLayout, _buffer_depths, compile_gemm
from perf_model.compiler.vector import vector_commands, vector_registers
from workloads.ops import Gemm, Workload
from workloads.vector_ops import VectorOp

__all__ = ["EncoderLayer", "compile_encoder", "encoder_gemms", "encoder_layer", "GEMM_ROLES"]

#: The layer's matrix ops, in the workload's order.
GEMM_ROLES = ("query", "key", "value", "scores", "context", "output", "ffn_in", "ffn_out")
#: The tail chain's queue depth: no limit (the layer's whole program is cut into queue-loads at the end).
_UNBOUNDED = 1 << 30


@dataclasses.dataclass(frozen=True)
class EncoderLayer:
    """One encoder layer: its eight GEMMs (:data:`GEMM_ROLES`, one instance each; ``scores`` and
    ``context`` per head) and its vector ops: the softmax over the scores, then the tail's links
    (after ``output``: the residual add of ``x`` and the first norm; after ``ffn_in``: the
    activation; after ``ffn_out``: the residual add of ``h1`` and the second norm)."""

    gemms: tuple[Gemm, ...]
    heads: int
    softmax: VectorOp
    links: tuple[tuple[VectorOp, ...], tuple[VectorOp, ...], tuple[VectorOp, ...]]

    @property
    def tokens(self) -> int:
        """Tokens of one sequence."""
        return self.gemms[3].m

    @property
    def seqs(self) -> int:
        """Sequences (the batch)."""
        return self.gemms[0].m // self.tokens

    @property
    def d_model(self) -> int:
        return self.gemms[0].n

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads


def encoder_gemms(tokens: int, d_model: int, heads: int, d_ff: int, requants: Sequence[object],
                  seqs: int = 1) -> tuple[Gemm, ...]:
    """The eight one-instance GEMMs of a layer over ``seqs`` sequences of ``tokens`` tokens, in
    :data:`GEMM_ROLES` order (``key`` as ``K^T``; ``scores`` and ``context`` one head's)."""
    dh = d_model // heads
    m = seqs * tokens
    shapes = ((m, d_model, d_model), (d_model, d_model, m), (m, d_model, d_model),
              (tokens, dh, tokens), (tokens, tokens, dh), (m, d_model, d_model), (m, d_model, d_ff),
              (m, d_ff, d_model))
    return tuple(Gemm(m=m, k=k, n=n, name=role, requant=rq)  # type: ignore[arg-type]
                 for (m, k, n), role, rq in zip(shapes, GEMM_ROLES, requants, strict=True))


def encoder_layer(workload: Workload) -> EncoderLayer:
    """``workload`` as one encoder layer, its matrix ops in :data:`GEMM_ROLES` order.

    Raises:
        ModelError: the workload is not one requantised encoder layer (the first rule it breaks).
    """
    from perf_model.compiler.network import LINK_KINDS

    ops = workload.ops
    if len(ops) != len(GEMM_ROLES) or not all(isinstance(op, Gemm) for op in ops):
        raise ModelError(f"an encoder layer is {len(GEMM_ROLES)} GEMMs ({', '.join(GEMM_ROLES)}), not "
                         f"{len(ops)} matrix ops")
    counts = workload.counts or (1,) * len(ops)
    if any(c != 1 for c in counts) or any(c != 1 for c in workload.vector_counts or ()):
        raise ModelError("the layers repeat: a later layer's input would have to be transposed on chip for its "
                         "keys (no transpose unit)")
    g = [op for op in ops if isinstance(op, Gemm)]
    if any(op.requant is None for op in g):
        raise ModelError("every GEMM of the layer must be requantised (int8 activations between them)")
    q, sc = g[0], g[3]
    tokens, d_model, d_ff = sc.m, q.n, g[6].n
    seqs = q.m // tokens if tokens and q.m % tokens == 0 else 0
    heads = sc.batch // seqs if seqs and sc.batch % seqs == 0 else 0
    dh = d_model // heads if heads else 0
    want = ((seqs * tokens, d_model, d_model, 1),) * 3 + ((tokens, dh, tokens, seqs * heads),
                                                          (tokens, tokens, dh, seqs * heads),
                                                          (seqs * tokens, d_model, d_model, 1),
                                                          (seqs * tokens, d_model, d_ff, 1),
                                                          (seqs * tokens, d_ff, d_model, 1))
    for role, op, shape in zip(GEMM_ROLES, g, want, strict=True):
        if not heads or (op.m, op.k, op.n, op.batch) != shape:
            raise ModelError(f"the {role} GEMM {op.m}x{op.k}x{op.n} (batch {op.batch}) is not an encoder layer's "
                             f"{'x'.join(map(str, shape[:3]))} (batch {shape[3]})" if heads else
                             f"the scores GEMM ({sc.m}x{sc.k}x{sc.n}, batch {sc.batch}) does not split the "
                             f"{q.m} tokens of {d_model} channels into sequences and heads")
    after = workload.vector_after or (len(ops),) * len(workload.vector_ops)
    by: dict[int, list[VectorOp]] = {}
    for vop, where in zip(workload.vector_ops, after, strict=True):
        by.setdefault(where, []).append(vop)
    softmax = by.pop(4, [])
    if len(softmax) != 1 or softmax[0].kind != "softmax":
        raise ModelError(f"the scores must be followed by one softmax, not {[o.kind for o in softmax] or 'none'}")
    stray = sorted(set(by) - {6, 7, 8})
    if stray:
        raise ModelError(f"vector ops after the {GEMM_ROLES[stray[0] - 1]} GEMM: only the softmax and the tail's "
                         f"links ({', '.join(LINK_KINDS)}) run in the layer's program")
    links = (tuple(by.get(6, ())), tuple(by.get(7, ())), tuple(by.get(8, ())))
    gemms = encoder_gemms(tokens, d_model, heads, d_ff, [op.requant for op in g], seqs)
    return EncoderLayer(gemms, heads, softmax[0], links)


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


@dataclasses.dataclass(frozen=True)
class _Slice:
    """Where a GEMM's own tensor lives in the layer: rows from ``row`` and elements from ``col`` of ``tensor``."""

    tensor: str
    row: int = 0
    col: int = 0


def _rebase(cmd: Command, own: TensorLayout, at: TensorLayout, where: _Slice, bus: int) -> Command:
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


def _moved(program: GemmProgram, slices: dict[str, _Slice], tensors: dict[str, TensorLayout], shift: int,
           bus: int) -> list[Command]:
    """``program``'s commands with transfers of its sliced tensors re-addressed, the others shifted by ``shift``."""
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


def _softmax_chunks(config: ArrayConfig, softmax: VectorOp, s: TensorLayout, heads: int, tokens: int) -> list[Command]:
    """The softmax over every row of ``s`` (``heads * tokens`` rows of ``tokens`` scores), in place:
    per chunk that fits the ifmap, LOAD its rows (row-major: word ``f`` of row ``r`` at ``r * words +
    f``), one VECTOR, STORE them back. A chunk is whole heads, or, when one head's rows do not fit,
    a band of one head's query rows (a causal mask's offset moved by the band's first query)."""
    lanes = config.vector_lanes
    if s.row_elems % lanes:
        raise ModelError(f"a score row of {s.row_elems} elements is not whole words of {lanes} lanes")
    words = s.row_elems // lanes
    depth = _buffer_depths(config)[0]
    if depth < words:
        raise ModelError(f"a score row of {words} words does not fit the ifmap ({depth} words)")
    causal = softmax.param("causal_offset", -1)
    bands: list[tuple[int, int, int]]  # (first row, heads, query rows a head)
    if depth // words >= tokens:
        per = depth // (words * tokens)
        bands = [(h0 * tokens, min(per, heads - h0), tokens) for h0 in range(0, heads, per)]
    else:
        per = depth // words
        bands = [(h * tokens + q0, 1, min(per, tokens - q0)) for h in range(heads) for q0 in range(0, tokens, per)]
    out: list[Command] = []
    for row0, count, queries in bands:
        rows = count * queries

        def move(opcode: int, row0: int = row0, rows: int = rows) -> Command:
            return Command.make(opcode, wait_vec=1, buffer=Buffer.IFMAP, dram_addr=s.base + row0 * s.pitch,
                                dram_stride=s.pitch, rows=rows, words=words, buf_addr=0, row_step=words, word_step=1)

        params = softmax.params
        if causal >= 0:  # query q0 + i of the head sees keys j <= offset + q0 + i
            params = tuple((k, causal + row0 % tokens if k == "causal_offset" else v) for k, v in params)
        shaped = dataclasses.replace(softmax, shape=(count, queries, tokens), out_shape=(count, queries, tokens),
                                     axis=2, params=params)
        out += [move(Opcode.LOAD), *vector_commands(vector_registers(shaped, lanes), wait_dma=1), move(Opcode.STORE)]
    return out


def compile_encoder(config: ArrayConfig, layer: EncoderLayer) -> GemmProgram:
    """The layer's one program (module docstring).

    Tensors: ``x`` (the input, ``T x D``), ``xt`` (its transpose, ``D x T``), ``Q``, ``KT``, ``V``,
    ``S`` (the scores, then the probabilities, of all heads: ``H T`` rows of ``T``), ``ctx`` and
    ``out`` (the layer's output); per GEMM ``i`` of the attention its weights ``b{i}`` (the key's
    ``a1``: ``Wk^T``) and output-stage parameters ``q{i}``; the tail's as ``tail.b{j}``, ``tail.q{j}``.

    Raises:
        ModelError: no vector unit, a design other than weight-stationary, a key GEMM with
            per-channel requantisation, heads whose slices are not whole bus beats or layouts,
            a GEMM or chunk the design cannot run, or the tail's reason.
    """
    if not config.vector_lanes:
        raise ModelError(f"design {config.short_name()} has no vector unit (vector_unit = false)")
    if config.dataflow is not Dataflow.WS:
        raise ModelError(f"an encoder layer as one program needs a weight-stationary array (a head's operands are "
                         f"column bands of row-major tensors), not {config.dataflow.value.upper()}")
    g = layer.gemms
    if len(g) != len(GEMM_ROLES):
        raise ModelError(f"an encoder layer has {len(GEMM_ROLES)} GEMMs ({', '.join(GEMM_ROLES)}), not {len(g)}")
    T, D, H, B = layer.tokens, layer.d_model, layer.heads, layer.seqs
    if D % H:
        raise ModelError(f"{D} channels do not split into {H} heads")
    key_rq = g[1].requant
    if key_rq is None or key_rq.channels != 1:  # type: ignore[attr-defined]
        raise ModelError("the key GEMM runs transposed (K^T = Wk^T x^T), so its requantisation must be one "
                         "parameter set for the tensor, not per channel")
    programs = [compile_gemm(config, gemm, requant=True) for gemm in g[:5]]
    tail = compile_network(config, g[5:], layer.links, [EXTERNAL, None, 1], queue_depth=_UNBOUNDED)
    own = [p.tensors for p in programs]
    dh = layer.d_head

    def like(layout: TensorLayout, name: str, rows: int | None = None) -> TensorLayout:
        if rows is None:
            return dataclasses.replace(layout, name=name)
        return dataclasses.replace(layout, name=name, rows=rows, shape=(rows, layout.shape[1]))

    net = {"x": like(own[0]["a"], "x"), "xt": like(own[1]["b"], "xt"), "Q": like(own[0]["c"], "Q"),
           "KT": like(own[1]["c"], "KT"), "V": like(own[2]["c"], "V"), "S": like(own[3]["c"], "S", B * H * T),
           "ctx": like(own[0]["c"], "ctx")}
    for part, name, big in ((3, "a", "Q"), (4, "b", "V"), (4, "c", "ctx")):
        if own[part][name].row_elems != dh or net[big].row_elems != D:
            raise ModelError(f"a head's {dh} channels are not a column band of {big} ({net[big].row_elems} "
                             f"elements a row against {own[part][name].row_elems} a head)")
    if own[4]["a"].row_elems != own[3]["c"].row_elems:
        raise ModelError(f"a head's scores ({own[3]['c'].row_elems} elements a row) are not laid out as the "
                         f"context's A ({own[4]['a'].row_elems})")
    # (GEMM, own tensor) -> slice of the layer's tensors; per head for the scores and the context.
    parts: list[tuple[GemmProgram, dict[str, _Slice], str]] = [
        (programs[0], {"a": _Slice("x"), "c": _Slice("Q")}, "0"),
        (programs[1], {"b": _Slice("xt"), "c": _Slice("KT")}, "1"),
        (programs[2], {"a": _Slice("x"), "c": _Slice("V")}, "2"),
    ]
    heads = [(b, h) for b in range(B) for h in range(H)]  # S holds head (b, h)'s scores from row (b H + h) T
    parts += [(programs[3], {"a": _Slice("Q", b * T, h * dh), "b": _Slice("KT", h * dh, b * T),
                             "c": _Slice("S", (b * H + h) * T)}, "3") for b, h in heads]
    parts += [(programs[4], {"a": _Slice("S", (b * H + h) * T), "b": _Slice("V", b * T, h * dh),
                             "c": _Slice("ctx", b * T, h * dh)}, "4") for b, h in heads]
    tail_slices = {"a0": _Slice("ctx"), "s0": _Slice("x"), "c2": _Slice("out")}
    net["out"] = like(tail.tensors["c2"], "out")
    bus = programs[0].data_bytes

    def place(cursor: int) -> tuple[dict[str, TensorLayout], list[int], int]:
        tensors: dict[str, TensorLayout] = {}
        for name, t in net.items():
            tensors[name] = dataclasses.replace(t, base=cursor)
            cursor = _align(cursor + t.nbytes, PAGE)
        shifts = []
        seen: dict[str, int] = {}
        for program, slices, tag in [*parts, (tail, tail_slices, "tail.")]:
            if tag in seen:  # another head of the same GEMM: the same weights and parameters
                shifts.append(seen[tag])
                continue
            kept = {n: t for n, t in program.tensors.items() if n not in slices}
            lo = min(t.base for t in kept.values())
            shift = cursor - lo
            for n, t in kept.items():
                name = f"{tag}{n}" if tag == "tail." else f"{n}{tag}"
                tensors[name] = dataclasses.replace(t, name=name, base=t.base + shift)
            seen[tag] = shift
            shifts.append(shift)
            cursor = _align(max(t.base + t.nbytes for t in kept.values()) + shift, PAGE)
        return tensors, shifts, cursor

    def emit(tensors: dict[str, TensorLayout], shifts: list[int]) -> list[Command]:
        commands: list[Command] = []
        for i, (program, slices, _) in enumerate(parts):
            commands += _moved(program, slices, tensors, shifts[i], bus)
            if i == 2 + len(heads):  # every head's scores are in S
                commands += _softmax_chunks(config, layer.softmax, tensors["S"], len(heads), T)
        return commands + _moved(tail, tail_slices, tensors, shifts[-1], bus)

    entry = queue_entry_commands(bus)
    draft, draft_shifts, _ = place(0)
    length = len(_split(emit(draft, draft_shifts), QUEUE_DEPTH, entry)[0])
    tensors, shifts, end = place(_align(length * COMMAND_BYTES, PAGE))
    commands, chunks = _split(emit(tensors, shifts), QUEUE_DEPTH, entry)
    runs = tuple(r for p, _, _ in parts for r in p.runs) + tail.runs
    return GemmProgram(tuple(commands), tensors, 0, end, bus, True, runs, chunks)
