"""One program for a LLaMA decoder block: pre-norms, rotary embeddings, causal attention over a KV cache, SwiGLU.

The block (the ``llama_block`` and ``llama_decode`` builtins, and Hugging Face Llama-style configs),
on ``T`` new tokens per sequence of ``D`` int8 channels after ``kv`` cached ones (prefill: ``kv = 0``;
decode: ``T = 1``), ``H`` query heads of ``dh = D / H`` channels and ``Hkv`` key/value heads, ``Hkv``
dividing ``H`` (multi-head attention: ``Hkv = H``; grouped-query: each key/value head serves a group
of ``G = H / Hkv`` query heads; multi-query: ``Hkv = 1``), ``Tk = kv + T`` keys, every GEMM
requantised by the output stage::

    h = rmsnorm(x)
    Q = rope(h Wq)     K[kv ..] = rope(h Wk)     V[kv ..] = h Wv     K^T = transpose(K)
    S_h = Q_h K_g^T    P = softmax(S) (causal: query i sees keys j <= kv + i)    ctx_h = P_h V_g   (g = h // G)
    x1 = add(x, ctx Wo)      h2 = rmsnorm(x1)
    out = add(x1, silu(h2 Wg, h2 Wu) Wd)

The KV cache lives in DRAM in the tensors ``K`` and ``V`` (``B Tk`` rows of ``Dkv = Hkv dh``, sequence
``b`` from row ``b Tk``) and, for the scores' ``B`` operand, ``K^T`` (``Dkv`` rows, sequence ``b``'s keys from
column ``b kc``): the host writes the ``kv`` cached rows and columns (the cache the earlier steps
left), and the program writes the new tokens' rows after them (the key rows after their RoPE), so
after the program the cache holds ``Tk`` tokens for the next step. The vector unit transposes into
``K^T`` only the keys from ``kv0``, ``kv`` rounded down to a whole number of words and bus beats
(a transposed band is stored from a column on the bus), in bands of rows: a decode step transposes
at most one word's worth of cached keys again, not the whole cache.

Every tensor goes through DRAM inside the one program (``perf_model.compiler.dram_graph``): the
GEMMs are ``compile_gemm`` programs re-addressed to slices of the block's tensors (a head's
operands are column bands of ``Q`` and ``V`` and a row band of ``K^T``: its group's band of the key/value
head, which each query head of the group reads; in a decode step, one query a sequence, one
scores and one context GEMM serve a whole group: its query heads are consecutive rows of ``Q``
viewed as rows of ``dh``, so the group's cached keys and values are loaded on chip once for all of
them), the vector ops run in bands
of token rows that fit the ifmap (LOAD, VECTOR, STORE), the softmax over ``S`` in chunks of whole
heads or query bands. The RoPE table (one row of ``cos``/``sin`` per position ``kv ..``,
``accel_spec.vector_isa.rope_table_row``) is a constant the host lays out, as the weights.
"""

from __future__ import annotations

import dataclasses
import math

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.vector_isa import ROPE_TABLE_WORDS
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
    row_steps,
)
from perf_model.compiler.program import QPARAM_CHANNELS, GemmProgram, TensorLayout, compile_gemm
from workloads.ops import Gemm, Requant, Workload
from workloads.vector_ops import VectorOp

__all__ = ["DecoderBlock", "decoder_block", "compile_decoder", "DECODER_ROLES", "gemm_groups", "rope_table_layout"]

#: The block's matrix ops, in the workload's order.
DECODER_ROLES = ("wq", "wk", "wv", "scores", "context", "wo", "w_gate", "w_up", "w_down")
#: The vector ops after each number of matrix ops (``Workload.vector_after``), in order.
_VECTOR_SLOTS = {0: ("rmsnorm",), 1: ("rope",), 2: ("rope",), 4: ("softmax",), 6: ("add", "rmsnorm"),
                 8: ("silu",), 9: ("add",)}


@dataclasses.dataclass(frozen=True)
class DecoderBlock:
    """One decoder block: its nine GEMMs (:data:`DECODER_ROLES`, ``scores`` and ``context`` one head's;
    ``wk`` and ``wv`` one sequence's when the batch has several sequences after a cache), ``heads``
    (query heads), ``seqs``, ``kv`` cached tokens a sequence, its vector ops by name: ``norm1``,
    ``rope_q``, ``rope_k``, ``softmax``, ``add1``, ``norm2``, ``silu``, ``add2``, and ``kv_heads``
    (key/value heads, dividing ``heads``; 0: ``heads``, multi-head attention)."""

    gemms: tuple[Gemm, ...]
    heads: int
    seqs: int
    kv: int
    named_ops: tuple[tuple[str, VectorOp], ...]
    kv_heads: int = 0

    @property
    def key_heads(self) -> int:
        """Key/value heads: ``kv_heads``, or ``heads`` (multi-head attention)."""
        return self.kv_heads or self.heads

    @property
    def group(self) -> int:
        """Query heads a key/value head serves (1: multi-head, ``heads``: multi-query attention)."""
        return self.heads // self.key_heads

    @property
    def grouped(self) -> bool:
        """Whether one scores and one context GEMM serve a whole group of query heads (a decode step,
        one query a sequence, with groups of several heads: module docstring), not one a head."""
        return self.group > 1 and self.tokens == 1

    @property
    def d_kv(self) -> int:
        """Channels of a token's keys (and of its values): ``key_heads * d_head``."""
        return self.key_heads * self.d_head

    @property
    def vector(self) -> dict[str, VectorOp]:
        """The vector ops by name."""
        return dict(self.named_ops)

    @property
    def tokens(self) -> int:
        """New tokens of one sequence."""
        return self.gemms[3].m

    @property
    def keys(self) -> int:
        """Keys a query sees at most: ``kv + tokens``."""
        return self.kv + self.tokens

    @property
    def d_model(self) -> int:
        return self.gemms[0].n

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads

    @property
    def per_sequence(self) -> bool:
        """Whether the key and value GEMMs run once a sequence (their new rows follow each sequence's cache)."""
        return self.seqs > 1 and self.kv > 0

    @property
    def gemm_programs(self) -> int:
        """GEMM programs of the one program: each GEMM's column groups (:func:`gemm_groups`), the key and
        value GEMMs once a sequence when :attr:`per_sequence`, the scores and context once a head (once a
        key/value head when :attr:`grouped`)."""
        each = [len(g) for g in gemm_groups(self)]
        seqs = self.seqs if self.per_sequence else 1
        units = self.key_heads if self.grouped else self.heads
        return each[0] + seqs * (each[1] + each[2]) + self.seqs * units * (each[3] + each[4]) + sum(each[5:])

    @property
    def vector_op_count(self) -> int:
        """The workload's vector ops the program runs."""
        return len(self.named_ops)


def decoder_block(workload: Workload) -> DecoderBlock:
    """``workload`` as one decoder block, its matrix ops in :data:`DECODER_ROLES` order.

    Raises:
        ModelError: the workload is not one requantised LLaMA-style block (the first rule it breaks).
    """
    ops = workload.ops
    if len(ops) != len(DECODER_ROLES) or not all(isinstance(op, Gemm) for op in ops):
        raise ModelError(f"a decoder block is {len(DECODER_ROLES)} GEMMs ({', '.join(DECODER_ROLES)}), not "
                         f"{len(ops)} matrix ops")
    if set(workload.counts or (1,)) | set(workload.vector_counts or ()) != {1}:
        raise ModelError("the ops repeat: one decoder block is one instance of each op")
    g = [op for op in ops if isinstance(op, Gemm)]
    if any(op.requant is None for op in g):
        raise ModelError("every GEMM of the block must be requantised (int8 activations between them)")
    q, sc = g[0], g[3]
    tokens, keys, d_model, d_ff = sc.m, sc.n, q.n, g[6].n
    seqs = q.m // tokens if tokens and q.m % tokens == 0 else 0
    heads = sc.batch // seqs if seqs and sc.batch % seqs == 0 else 0
    dh = d_model // heads if heads else 0
    m = seqs * tokens
    wk = g[1]
    n_kv = wk.n // dh if dh and wk.n % dh == 0 else 0
    kv_heads = n_kv if n_kv and heads % n_kv == 0 else 0
    if heads and keys >= tokens and (m, d_model) == (wk.m, wk.k) and not kv_heads:
        raise ModelError(f"the wk GEMM {wk.m}x{wk.k}x{wk.n} (batch {wk.batch}) is not a decoder block's keys: "
                         f"{wk.n} columns are not the {dh} channels of a number of key/value heads dividing the "
                         f"{heads} query heads (GQA/MQA: n_kv_heads * d_head, n_kv_heads | n_heads)")
    kvd = kv_heads * dh
    want = ((m, d_model, d_model, 1),) + ((m, d_model, kvd, 1),) * 2 + ((tokens, dh, keys, seqs * heads),
                                                                       (tokens, keys, dh, seqs * heads),
                                              (m, d_model, d_model, 1), (m, d_model, d_ff, 1), (m, d_model, d_ff, 1),
                                              (m, d_ff, d_model, 1))
    for role, op, shape in zip(DECODER_ROLES, g, want, strict=True):
        if not heads or keys < tokens or (op.m, op.k, op.n, op.batch) != shape:
            raise ModelError(f"the {role} GEMM {op.m}x{op.k}x{op.n} (batch {op.batch}) is not a decoder block's "
                             f"{'x'.join(map(str, shape[:3]))} (batch {shape[3]})" if heads and keys >= tokens else
                             f"the scores GEMM ({sc.m}x{sc.k}x{sc.n}, batch {sc.batch}) does not split the "
                             f"{q.m} tokens of {d_model} channels into sequences and heads over a cache")
    by = ops_after(workload)
    got = {k: tuple(o.kind for o in v) for k, v in by.items()}
    if got != _VECTOR_SLOTS:
        raise ModelError(f"the vector ops {got} are not a LLaMA block's {_VECTOR_SLOTS} (after that many matrix ops)")
    if by[2][0].shape[-2:] != (kv_heads, dh) or by[1][0].shape[-2:] != (heads, dh):
        raise ModelError(f"the RoPEs over heads {by[1][0].shape[-2:]} and {by[2][0].shape[-2:]} are not the block's "
                         f"{heads} query and {kv_heads} key heads of {dh} channels")
    if not by[8][0].param("gated", 0):
        raise ModelError("the FFN's SiLU must gate the up projection (SwiGLU)")
    names = ("norm1", "rope_q", "rope_k", "softmax", "add1", "norm2", "silu", "add2")
    vector = tuple(zip(names, [op for k in sorted(by) for op in by[k]], strict=True))
    kv = keys - tokens
    per_seq = seqs > 1 and kv > 0
    rq = [op.requant for op in g]
    kv_m = tokens if per_seq else m
    shapes = ((m, d_model, d_model), (kv_m, d_model, kvd), (kv_m, d_model, kvd), (tokens, dh, keys),
              (tokens, keys, dh), (m, d_model, d_model), (m, d_model, d_ff), (m, d_model, d_ff), (m, d_ff, d_model))
    gemms = tuple(Gemm(m=mm, k=k, n=n, name=role, requant=r)  # type: ignore[arg-type]
                  for (mm, k, n), role, r in zip(shapes, DECODER_ROLES, rq, strict=True))
    return DecoderBlock(gemms, heads, seqs, kv, vector, 0 if kv_heads == heads else kv_heads)


def gemm_groups(block: DecoderBlock) -> list[list[tuple[int, int, str]]]:
    """Per GEMM of the block, its column groups ``(first column, columns, tag)``: one program a
    group of at most ``QPARAM_CHANNELS`` output channels (the output stage's parameter buffer), its
    weights ``b{tag}`` the group's columns; one group is tagged by the GEMM's index alone."""
    out = []
    for i, gemm in enumerate(block.gemms):
        spans = [(c0, min(QPARAM_CHANNELS, gemm.n - c0)) for c0 in range(0, gemm.n, QPARAM_CHANNELS)]
        out.append([(c0, n, str(i) if len(spans) == 1 else f"{i}.{j}") for j, (c0, n) in enumerate(spans)])
    return out


def _columns(rq: Requant, c0: int, n: int) -> Requant:
    """``rq`` for channels ``c0 .. c0 + n - 1``."""
    if rq.channels == 1:
        return rq
    return dataclasses.replace(rq, multiplier=rq.channel_values("multiplier", n, c0),
                               shift=rq.channel_values("shift", n, c0), bias=rq.channel_values("bias", n, c0))


def rope_table_layout(block: DecoderBlock, lanes: int) -> TensorLayout:
    """The RoPE table's DRAM layout: one row a new token's position (``kv + i``), ``2 dh`` codes
    (``accel_spec.vector_isa.rope_table_row``)."""
    width = ROPE_TABLE_WORDS * block.d_head
    return TensorLayout("rope", 0, block.tokens, width, 1, False, (block.tokens, width))


def compile_decoder(config: ArrayConfig, block: DecoderBlock) -> GemmProgram:
    """The block's one program (module docstring).

    Tensors: ``x`` (the input, ``B T x D``), ``h``, ``Q``, ``K`` and ``V`` (the cache and the new rows,
    ``B Tk x Dkv``), ``KT`` (``Dkv x B Tk``), ``S`` (``B H T`` rows of ``Tk``), ``ctx``, ``o``, ``x1``, ``h2``,
    ``gate``, ``up``, ``g``, ``dn``, ``out`` and the table ``rope``; per GEMM ``i`` its weights ``b{i}``
    and output-stage parameters ``q{i}``.

    Raises:
        ModelError: no vector unit, a design other than weight-stationary, heads whose slices are not
            whole bus beats or layouts, a vector op the unit cannot run (the reason), or a GEMM or
            band the design cannot hold.
    """
    require_block_design(config, "a decoder block")
    g = block.gemms
    T, Tk, D, H, B, kv, dh = block.tokens, block.keys, block.d_model, block.heads, block.seqs, block.kv, block.d_head
    groups = gemm_groups(block)
    rows = block.group if block.grouped else 1  # query heads a scores (context) GEMM serves: its rows
    g = tuple(dataclasses.replace(gemm, m=gemm.m * rows) if i in (3, 4) else gemm for i, gemm in enumerate(g))
    compiled = [[compile_gemm(config, dataclasses.replace(gemm, n=n, requant=_columns(gemm.requant, c0, n)),  # type: ignore[arg-type]
                              requant=True) for c0, n, _ in spans] for gemm, spans in zip(g, groups, strict=True)]
    programs = [c[0] for c in compiled]
    own = [p.tensors for p in programs]

    def gemm(i: int, slices: dict[str, Slice]) -> list[GemmPart]:
        """GEMM ``i``'s parts, one a column group (its ``B`` and ``C`` slices moved by the group's first column)."""
        return [GemmPart(prog, {k: Slice(w.tensor, w.row, w.col + c0) if k in ("b", "c") else w
                                for k, w in slices.items()}, tag)
                for prog, (c0, _, tag) in zip(compiled[i], groups[i], strict=True)]

    bus = programs[0].data_bytes
    step = math.lcm(config.vector_lanes, bus)
    Dkv = block.d_kv
    attention, kc = attention_layouts(config, programs[3], Dkv, B, H, T, Tk)
    x, f = own[0]["a"], own[8]["a"]  # rows of D and of the FFN's width, as a GEMM's A (every GEMM's C is a band)
    # the cache's rows hold Dkv keys (values) each, unpadded as x's D (the RoPE over K's rows needs it)
    net = {"x": like(x, "x"), "h": like(x, "h"), "Q": like(x, "Q"), "K": like(x, "K", B * Tk, Dkv, Dkv),
           "V": like(x, "V", B * Tk, Dkv, Dkv), **attention, "ctx": like(x, "ctx"), "o": like(x, "o"),
           "x1": like(x, "x1"), "h2": like(x, "h2"), "gate": like(f, "gate"), "up": like(f, "up"), "g": like(f, "g"),
           "dn": like(x, "dn"),
           "out": like(x, "out"), "rope": rope_table_layout(block, config.vector_lanes)}
    for part, name in ((3, "a"), (4, "b"), (4, "c")):
        if own[part][name].row_elems != dh:
            raise ModelError(f"a head's {dh} channels are not a column band of the {D}-channel tensors (a head's "
                             f"operand is laid out {own[part][name].row_elems} elements a row)")
    v = block.vector
    m = B * T
    seq_rows = [(b * T, b * Tk + kv) for b in range(B)] if block.per_sequence else [(0, kv)]
    parts: list[GemmPart | StepPart] = [row_steps(config, v["norm1"], [("x", 0)], ("h", 0), m)]
    parts += gemm(0, {"a": Slice("h"), "c": Slice("Q")})
    for i, cache in ((1, "K"), (2, "V")):
        parts += [p for a, c in seq_rows for p in gemm(i, {"a": Slice("h", a), "c": Slice(cache, c)})]
    parts.append(row_steps(config, v["rope_q"], [("Q", 0)], ("Q", 0), m, period=T, table="rope"))
    parts += [row_steps(config, v["rope_k"], [("K", b * Tk + kv)], ("K", b * Tk + kv), T, period=T, table="rope")
              for b in range(B)]
    kv0 = kv // step * step  # the first key transposed: the cache's columns before it are the host's
    views = {}
    if block.grouped:  # Q and ctx as one row a head: a group's heads are consecutive rows
        if x.row_elems != D:
            raise ModelError(f"a row of Q is stored {x.row_elems} elements wide, not its {D}: its heads are not "
                             "consecutive rows of a head's channels")
        views = {"Qh": ("Q", like(x, "Qh", B * H, dh, dh)), "ctxh": ("ctx", like(x, "ctxh", B * H, dh, dh))}
    parts += attention_parts(config, gemm, v["softmax"], B, H, T, Tk, dh, kc, bus, kv0, block.key_heads,
                             ("Qh", "ctxh") if views else None)
    parts += [*gemm(5, {"a": Slice("ctx"), "c": Slice("o")}),
              row_steps(config, v["add1"], [("x", 0), ("o", 0)], ("x1", 0), m),
              row_steps(config, v["norm2"], [("x1", 0)], ("h2", 0), m),
              *gemm(6, {"a": Slice("h2"), "c": Slice("gate")}),
              *gemm(7, {"a": Slice("h2"), "c": Slice("up")}),
              row_steps(config, v["silu"], [("gate", 0), ("up", 0)], ("g", 0), m),
              *gemm(8, {"a": Slice("g"), "c": Slice("dn")}),
              row_steps(config, v["add2"], [("x1", 0), ("dn", 0)], ("out", 0), m)]
    return assemble(net, parts, bus, views)
