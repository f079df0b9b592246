"""One program for a stack of transformer encoder layers: the attention heads, the softmax, the FFN and the norms.

A layer (BERT's; the ``bert_base`` builtin), on an input ``x`` of ``T`` tokens of ``D`` int8
channels, ``H`` heads of ``dh = D / H`` channels, every GEMM requantised by the output stage::

    Q = x Wq        K = x Wk        V = x Wv        K^T = transpose(K)   (the vector unit)
    S_h = Q_h K_h^T            (per head: T x dh x T)
    P = softmax(S)             (per row of S, the vector unit)
    ctx_h = P_h V_h            (per head: T x T x dh, into columns h dh .. of ctx)
    out = LN(add(F2, h1)),  F2 = gelu(h1 W1) W2,  h1 = LN(add(ctx Wo, x))

The scores need ``K_h^T`` as their ``B`` operand (a channel's tokens in a row), a layout no GEMM
output gives on a weight-stationary array. The vector unit's transpose makes it on chip
(``perf_model.compiler.dram_graph.transpose_steps``: bands of ``K``'s rows LOADed, transposed,
STOREd as columns of ``K^T``), so a layer's input may come from anywhere, an earlier layer too:
``L`` stacked layers (a workload whose ops repeat ``L`` times) run as one program, layer ``l``
reading layer ``l - 1``'s output. The layers share one set of weights, as the workload's repeated
ops do.

Every tensor of the attention goes through DRAM, inside the one program: a head's operands are
slices of the ``Q``, ``K^T`` and ``V`` tensors (a column band of ``Q`` and ``V``, read with their
row pitch; a band of rows of ``K^T``), its scores are rows of one tensor ``S`` of all heads, the
softmax runs on ``S`` in ifmap chunks of whole heads (LOAD, VECTOR, STORE in place), and each
context head stores into its column band of ``ctx``. The output projection, the residual adds,
the norms and the FFN are one chain (``perf_model.compiler.network.compile_network``: on chip
where the live tensors fit the ifmap), reading ``ctx`` and, for the first add, the layer's input.
``perf_model.compiler.dram_graph.assemble`` puts the parts together and cuts the program into
queue-loads; total cycles are ``perf_model.program_timing.gemm_program_cycles`` of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from perf_model.compiler.dram_graph import (
    GemmPart,
    Slice,
    StepPart,
    assemble,
    attention_layouts,
    attention_parts,
    like,
    ops_after,
    require_block_design,
)
from perf_model.compiler.network import EXTERNAL, compile_network
from perf_model.compiler.program import GemmProgram, compile_gemm
from workloads.ops import Gemm, Workload
from workloads.vector_ops import VectorOp

__all__ = ["EncoderLayer", "compile_encoder", "encoder_gemms", "encoder_layer", "GEMM_ROLES"]

#: The layer's matrix ops, in the workload's order.
GEMM_ROLES = ("query", "key", "value", "scores", "context", "output", "ffn_in", "ffn_out")
#: The tail chain's queue depth: no limit (the layer's whole program is cut into queue-loads at the end).
_UNBOUNDED = 1 << 30


@dataclasses.dataclass(frozen=True)
class EncoderLayer:
    """``layers`` stacked encoder layers of one shape: their eight GEMMs (:data:`GEMM_ROLES`, one
    instance each; ``scores`` and ``context`` per head) and vector ops: the softmax over the scores,
    then the tail's links (after ``output``: the residual add of the layer's input and the first
    norm; after ``ffn_in``: the activation; after ``ffn_out``: the residual add of ``h1`` and the
    second norm)."""

    gemms: tuple[Gemm, ...]
    heads: int
    softmax: VectorOp
    links: tuple[tuple[VectorOp, ...], tuple[VectorOp, ...], tuple[VectorOp, ...]]
    layers: int = 1

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

    @property
    def gemm_programs(self) -> int:
        """GEMM programs of the one program: per layer the three projections, each head's scores and
        context, the tail's three."""
        return self.layers * (6 + 2 * self.seqs * self.heads)

    @property
    def vector_op_count(self) -> int:
        """The workload's vector ops the program runs (the softmax and the tail's links, per layer)."""
        return self.layers * (1 + sum(len(link) for link in self.links))


def encoder_gemms(tokens: int, d_model: int, heads: int, d_ff: int, requants: Sequence[object],
                  seqs: int = 1) -> tuple[Gemm, ...]:
    """The eight one-instance GEMMs of a layer over ``seqs`` sequences of ``tokens`` tokens, in
    :data:`GEMM_ROLES` order (``scores`` and ``context`` one head's)."""
    dh = d_model // heads
    m = seqs * tokens
    shapes = ((m, d_model, d_model),) * 3 + ((tokens, dh, tokens), (tokens, tokens, dh), (m, d_model, d_model),
                                             (m, d_model, d_ff), (m, d_ff, d_model))
    return tuple(Gemm(m=m, k=k, n=n, name=role, requant=rq)  # type: ignore[arg-type]
                 for (m, k, n), role, rq in zip(shapes, GEMM_ROLES, requants, strict=True))


def encoder_layer(workload: Workload) -> EncoderLayer:
    """``workload`` as encoder layers, its matrix ops in :data:`GEMM_ROLES` order, each op repeated
    as often as the others (``layers``: the ops' count).

    Raises:
        ModelError: the workload is not requantised encoder layers (the first rule it breaks).
    """
    from perf_model.compiler.network import LINK_KINDS

    ops = workload.ops
    if len(ops) != len(GEMM_ROLES) or not all(isinstance(op, Gemm) for op in ops):
        raise ModelError(f"an encoder layer is {len(GEMM_ROLES)} GEMMs ({', '.join(GEMM_ROLES)}), not "
                         f"{len(ops)} matrix ops")
    counts = set(workload.counts or (1,)) | set(workload.vector_counts or ())
    if len(counts) != 1:
        raise ModelError(f"the ops repeat unevenly ({sorted(counts)} times): not a stack of whole layers")
    layers = counts.pop()
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
    by = ops_after(workload)
    softmax = by.pop(4, [])
    if len(softmax) != 1 or softmax[0].kind != "softmax":
        raise ModelError(f"the scores must be followed by one softmax, not {[o.kind for o in softmax] or 'none'}")
    stray = sorted(set(by) - {6, 7, 8})
    if stray:
        raise ModelError(f"vector ops after the {GEMM_ROLES[stray[0] - 1]} GEMM: only the softmax and the tail's "
                         f"links ({', '.join(LINK_KINDS)}) run in the layer's program")
    links = (tuple(by.get(6, ())), tuple(by.get(7, ())), tuple(by.get(8, ())))
    gemms = encoder_gemms(tokens, d_model, heads, d_ff, [op.requant for op in g], seqs)
    return EncoderLayer(gemms, heads, softmax[0], links, layers)


def compile_encoder(config: ArrayConfig, layer: EncoderLayer) -> GemmProgram:
    """The layers' one program (module docstring).

    Tensors: ``x`` (the input, ``B T x D``), ``Q``, ``K``, ``KT`` (``D x B T``), ``V``, ``S`` (the
    scores, then the probabilities, of all heads: ``B H T`` rows of ``T``), ``ctx`` (each the last
    layer's), ``y{l}`` (layer ``l``'s output) and ``out`` (the last layer's); per GEMM ``i`` of the
    attention its weights ``b{i}`` and output-stage parameters ``q{i}``; the tail's as ``tail.b{j}``,
    ``tail.q{j}``.

    Raises:
        ModelError: no vector unit, a design other than weight-stationary, heads whose slices are not
            whole bus beats or layouts, a GEMM or chunk the design cannot run, or the tail's reason.
    """
    require_block_design(config, "an encoder layer")
    g = layer.gemms
    if len(g) != len(GEMM_ROLES):
        raise ModelError(f"an encoder layer has {len(GEMM_ROLES)} GEMMs ({', '.join(GEMM_ROLES)}), not {len(g)}")
    T, D, H, B = layer.tokens, layer.d_model, layer.heads, layer.seqs
    if D % H:
        raise ModelError(f"{D} channels do not split into {H} heads")
    programs = [compile_gemm(config, gemm, requant=True) for gemm in g[:5]]
    tail = compile_network(config, g[5:], layer.links, [EXTERNAL, None, 1], queue_depth=_UNBOUNDED)
    own = [p.tensors for p in programs]
    dh = layer.d_head
    bus = programs[0].data_bytes
    attention, kc = attention_layouts(config, programs[3], D, B, H, T, T)
    net = {"x": like(own[0]["a"], "x"), "Q": like(own[0]["c"], "Q"), "K": like(own[1]["c"], "K"),
           "KT": attention["KT"], "V": like(own[2]["c"], "V"), "S": attention["S"], "ctx": like(own[0]["c"], "ctx")}
    for part, name, big in ((3, "a", "Q"), (4, "b", "V"), (4, "c", "ctx")):
        if own[part][name].row_elems != dh or net[big].row_elems != D:
            raise ModelError(f"a head's {dh} channels are not a column band of {big} ({net[big].row_elems} "
                             f"elements a row against {own[part][name].row_elems} a head)")
    outputs = [f"y{i}" for i in range(layer.layers - 1)] + ["out"]
    for name in outputs:
        net[name] = like(tail.tensors["c2"], name)
    parts: list[GemmPart | StepPart] = []
    for i, out in enumerate(outputs):
        inp = "x" if i == 0 else outputs[i - 1]
        parts += [GemmPart(programs[0], {"a": Slice(inp), "c": Slice("Q")}, "0"),
                  GemmPart(programs[1], {"a": Slice(inp), "c": Slice("K")}, "1"),
                  GemmPart(programs[2], {"a": Slice(inp), "c": Slice("V")}, "2")]
        parts += attention_parts(config, lambda j, slices: [GemmPart(programs[j], slices, str(j))], layer.softmax,
                                 B, H, T, T, dh, kc, bus)
        parts.append(GemmPart(tail, {"a0": Slice("ctx"), "s0": Slice(inp), "c2": Slice(out)}, "tail."))
    return assemble(net, parts, bus)
