"""What one chip does in one pass of one microbatch: its GEMMs, its elementwise HBM traffic and
its collectives (pure functions; the op records come from :mod:`workloads.llm_ops`).

A pass is timed on one stage: ``layers`` layers (:func:`perf_model.pod.stages.stage_layers`),
with the LM head on the last stage. A pass is:

* GEMMs: the stage's layers times the layer's ops (:func:`chip_layer_ops`), plus the LM head;
  the backward pass has each forward GEMM's two backward GEMMs. Each op is split over the chip's
  ``cores`` (:func:`core_op`).
* Elementwise work (norms, residual adds, rotary embedding, the activation function, the softmax
  when the scores are materialised, the MoE combine) streams through HBM once per tensor: per
  token and layer it reads and writes ``4 d + 6 d + 2 (hq + hkv) hd + w_act + 2 hq T + moe``
  elements (``w_act`` = ``3 w`` gated or ``2 w``, ``w`` the FFN columns on the chip times
  ``top_k`` for MoE; ``T`` the attended context; ``moe`` = ``(top_k + 1) d``); the backward pass
  moves twice that. With sequence parallelism the ``10 d`` of the norms, dropouts and residuals
  is sharded over ``tp`` (``10 d / tp``; Korthikanti et al. 2022).
* The attention core (the ``scores`` and ``context`` GEMMs and, when the scores are materialised,
  the softmax's ``2 hq T``) is kept apart as well (``core_*``): selective recomputation runs it
  again in the backward pass.
* Collectives per layer: two all-reduces of the activations over the tensor group in each pass
  (one with a parallel block), two all-to-alls over the expert group per MoE layer and pass
  (dispatch and combine, ``top_k`` copies of each token, times ``capacity_factor`` when the split
  sets one: the buffers are sent whole); per microbatch one point-to-point send
  of the activations to the next stage (and of their gradient back); ``interleave`` sends per
  microbatch with the interleaved schedule.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from accel_spec.config import ArrayConfig
from accel_spec.pod_config import Split, SystemConfig
from workloads.llm_ops import LlmJob, LlmShape, backward, head_ops, layer_ops
from workloads.ops import Gemm, Requant

__all__ = ["Pass", "core_op", "core_splits", "CoreSplit", "passes", "chip_layer_ops", "operand_bytes", "OUTPUT",
           "expert_rows", "EXPERT_OPS"]

#: Every LLM op leaves the array through the output stage at the operand width (bf16 or int8 outputs).
OUTPUT = Requant(multiplier=(1 << 30,), shift=(0,))


@dataclass(frozen=True)
class Pass:
    """One pass (forward, backward, prefill or decode step) of one microbatch on the bottleneck stage.

    Attributes:
        ops: ``(gemm, count)`` pairs, each GEMM one core's share.
        vector_bytes: elementwise HBM traffic of the chip, bytes.
        tp_allreduce: bytes per tensor-parallel all-reduce, and ``tp_count`` how many.
        ep_alltoall: bytes each chip sends per all-to-all, and ``ep_count`` how many.
        p2p: bytes sent to the neighbouring stages in the pass.
        core_ops, core_vector_bytes, core_macs: the attention core's share of the forward pass
            (what selective recomputation repeats; empty in the backward pass).
        chip_ops, core_chip_ops: the whole chip's op each entry of ``ops`` and ``core_ops`` is a
            core's share of (what HBM serves when the cores share a cache, ``SystemConfig.l2_mib``;
            ``None``: nothing, the attention core of fused attention).
    """

    ops: tuple[tuple[Gemm, int], ...]
    vector_bytes: float
    tp_allreduce: float = 0.0
    tp_count: int = 0
    ep_alltoall: float = 0.0
    ep_count: int = 0
    p2p: float = 0.0
    model_macs: int = field(default=0, compare=False)
    core_ops: tuple[tuple[Gemm, int], ...] = ()
    core_vector_bytes: float = 0.0
    core_macs: int = field(default=0, compare=False)
    chip_ops: tuple[Gemm | None, ...] = ()
    core_chip_ops: tuple[Gemm | None, ...] = ()


def operand_bytes(chip: ArrayConfig) -> tuple[float, float]:
    """Bytes of one weight and of one activation (KV cache and activations included) in HBM and on
    the links: the chip's weight and activation formats (W8A16 keeps 1-byte weights and 2-byte
    activations); int4 takes a byte unless the design packs it (``pack_int4``)."""
    def size(bits: int) -> float:
        return 0.5 if bits == 4 and chip.pack_int4 else max(1.0, bits / 8)
    return size(chip.weight_fmt.bits), size(chip.act_fmt.bits)


def core_op(op: Gemm, cores: int) -> Gemm:
    """One core's share of ``op`` on a chip of ``cores``: the instances if they divide, else the
    wider of ``m`` and ``n`` (rounded up), marked to leave through the output stage."""
    m, n, batch = op.m, op.n, op.batch
    if cores > 1:
        if batch % cores == 0:
            batch //= cores
        elif n >= m:
            n = -(-n // cores)
        else:
            m = -(-m // cores)
    return Gemm(m=m, k=op.k, n=n, batch=batch, name=op.name, requant=OUTPUT)


def _vector_elements(shape: LlmShape, tp: int, context: int, fused: bool, *, sequence_parallel: bool = False
                     ) -> tuple[float, float]:
    """Elementwise elements per token and layer: all of them, and the attention core's (softmax)."""
    hq = -(-shape.heads // tp)
    hkv = -(-shape.kv_heads // tp)
    if shape.moe:
        width = shape.top_k * -(-shape.expert_ffn // tp)
        moe = (shape.top_k + 1) * shape.d
    else:
        width = -(-shape.ffn // tp)
        moe = 0
    act = (3 if shape.gated else 2) * width
    softmax = 0 if fused else 2 * hq * context
    norms = 10 * shape.d / (tp if sequence_parallel else 1)
    return norms + 2 * (hq + hkv) * shape.head_dim + act + softmax + moe, softmax


#: The attention core's GEMMs (:func:`workloads.llm_ops.layer_ops` names).
CORE = ("scores", "context")


#: The expert GEMMs of an MoE layer (:func:`workloads.llm_ops.layer_ops` names).
EXPERT_OPS = ("expert_gate", "expert_up", "expert_down")


def expert_rows(shape: LlmShape, tokens: int, ep: int, capacity_factor: float) -> int:
    """Rows of each local expert's GEMMs on a chip of ``tokens`` tokens in an expert group of
    ``ep`` chips: the tokens routed to one expert, ``ceil(tokens * ep * top_k / experts)`` with
    dropless, evenly spread routing (``capacity_factor`` 0), else its capacity
    ``ceil(capacity_factor * tokens * ep * top_k / experts)`` (GShard's buffers, computed full)."""
    routed = tokens * ep * shape.top_k
    if not capacity_factor:
        return -(-routed // shape.experts)
    return max(1, math.ceil(capacity_factor * routed / shape.experts))


def chip_layer_ops(shape: LlmShape, *, seqs: int, q_len: int, kv_len: int, tp: int, ep: int,
                   capacity_factor: float = 0.0) -> list[Gemm]:
    """One layer's forward GEMMs on one chip.

    With ``tp`` dividing the heads and more than one new token per sequence (training, prefill):
    :func:`workloads.llm_ops.layer_ops` (Megatron's split over heads). Otherwise the projections'
    columns are split ``tp`` ways (QKV ``ceil((hq + 2 hkv) hd / tp)`` output columns, the output
    projection ``ceil(hq hd / tp)`` rows; tensor parallelism beyond the head count, as Pope et al.
    2022's weight-stationary layouts), and the attention core is split over (sequence, KV head)
    pairs, ``ceil(seqs * hkv / tp)`` of them per chip, each one GEMM for the ``hq / hkv`` query
    heads that share the KV head (multi-query and grouped-query attention read each K and V once;
    the KV cache is sharded over the batch when ``tp`` exceeds the KV heads, Pope et al. sec. 3.3).
    An MoE layer's expert GEMMs have :func:`expert_rows` rows (the capacity with ``capacity_factor``).
    """
    ops = _layer_ops(shape, seqs=seqs, q_len=q_len, kv_len=kv_len, tp=tp, ep=ep)
    if shape.moe and capacity_factor:
        rows = expert_rows(shape, seqs * q_len, ep, capacity_factor)
        ops = [dataclasses.replace(op, m=rows) if op.name in EXPERT_OPS else op for op in ops]
    return ops


def _layer_ops(shape: LlmShape, *, seqs: int, q_len: int, kv_len: int, tp: int, ep: int) -> list[Gemm]:
    divides = shape.heads % tp == 0
    if divides and q_len > 1:
        return layer_ops(shape, seqs=seqs, q_len=q_len, kv_len=kv_len, tp=tp, ep=ep)
    ops = layer_ops(shape, seqs=seqs, q_len=q_len, kv_len=kv_len, tp=tp if divides else 1, ep=ep)
    hd, tokens = shape.head_dim, seqs * q_len
    group = shape.heads // shape.kv_heads
    pairs = -(-seqs * shape.kv_heads // tp)
    if q_len == 1:  # decode: the query heads of a KV head as the rows of one GEMM
        core = [Gemm(m=group, k=hd, n=kv_len, batch=pairs, name="scores"),
                Gemm(m=group, k=kv_len, n=hd, batch=pairs, name="context")]
    else:
        heads = -(-seqs * shape.heads // tp)
        core = [Gemm(m=q_len, k=hd, n=kv_len, batch=heads, name="scores"),
                Gemm(m=q_len, k=kv_len, n=hd, batch=heads, name="context")]
    out: list[Gemm] = []
    for op in ops:
        if op.name == "scores":
            out += core
        elif op.name == "context":
            continue
        elif not divides and op.name == "qkv":
            out.append(Gemm(m=tokens, k=shape.d, n=-(-(shape.heads + 2 * shape.kv_heads) * hd // tp), name="qkv"))
        elif not divides and op.name == "out":
            out.append(Gemm(m=tokens, k=-(-shape.heads * hd // tp), n=shape.d, name="out"))
        elif not divides and op.name in ("gate", "up"):
            out.append(Gemm(m=op.m, k=op.k, n=-(-shape.ffn // tp), name=op.name))
        elif not divides and op.name == "down":
            out.append(Gemm(m=op.m, k=-(-shape.ffn // tp), n=op.n, name=op.name))
        elif not divides and op.name in ("router", "expert_gate", "expert_up", "expert_down"):
            wide = op.n if op.name != "expert_down" else op.k
            cut = -(-wide // tp)
            out.append(Gemm(m=op.m, k=cut if op.name == "expert_down" else op.k,
                            n=op.n if op.name == "expert_down" else cut, batch=op.batch, name=op.name))
        else:
            out.append(op)
    return out


class CoreSplit:
    """How each op of a pass is split over the chip's ``cores``.

    Without ``costs``: :func:`core_op`'s rule. With ``costs`` (an :class:`~perf_model.pod.OpCosts`
    of the chip), the fastest on the single-chip model of the candidates of :func:`core_splits`
    (the instances; else ``m``, ``n`` or ``k`` cut ``cores`` ways), a ``k`` cut paying for adding
    the cores' partial sums through HBM at ``hbm_bps`` (a compiler choosing the sharding of each
    matmul over the cores, as XLA does over a TPU's MXUs). With ``grid`` (cores sharing a cache,
    ``SystemConfig.l2_mib``) the candidates include cutting ``m`` and ``n`` (or the instances and
    one of them) over a grid of the cores, as a GPU's thread blocks tile the output.
    """

    def __init__(self, cores: int, costs: Any = None, hbm_bps: float = 0.0, act_bytes: float = 2.0,
                 grid: bool = False) -> None:
        self.cores, self.costs, self.hbm_bps, self.act_bytes, self.grid = cores, costs, hbm_bps, act_bytes, grid
        self._chosen: dict[Gemm, tuple[Gemm, float]] = {}

    def prepare(self, ops: list[Gemm]) -> None:
        """Cost every candidate of ``ops`` in one call to the chip model."""
        if self.costs is not None and self.cores > 1:
            self.costs.prepare([c for op in ops if op not in self._chosen
                                for c, _ in core_splits(op, self.cores, self.act_bytes, grid=self.grid)])

    def __call__(self, op: Gemm) -> tuple[Gemm, float]:
        """One core's op and the bytes of partial sums to add through HBM (0 unless ``k`` is cut)."""
        if self.costs is None or self.cores == 1:
            return core_op(op, self.cores), 0.0
        if op not in self._chosen:
            options = core_splits(op, self.cores, self.act_bytes, grid=self.grid)
            self._chosen[op] = min(options, key=lambda c: self.costs(c[0])[0] + c[1] / self.hbm_bps)
        return self._chosen[op]


def core_splits(op: Gemm, cores: int, act_bytes: float, *, grid: bool = False) -> list[tuple[Gemm, float]]:
    """The ways to cut ``op`` over ``cores``: the instances if they divide, else ``m``, ``n`` and
    (with at least 2 rows of ``k`` per core) ``k``, with the partial-sum bytes a ``k`` cut adds
    (``(cores + 1) m n batch`` elements: each core's partial read, the sum written). With ``grid``,
    also every ``a x b = cores`` grid (``1 < a < cores``) over ``m`` and ``n``, and over the
    instances (``a`` dividing them) and ``m`` or ``n``."""
    def make(m: int, k: int, n: int, batch: int) -> Gemm:
        return Gemm(m=m, k=k, n=n, batch=batch, name=op.name, requant=OUTPUT)
    if cores == 1:
        return [(make(op.m, op.k, op.n, op.batch), 0.0)]
    if op.batch % cores == 0:
        return [(make(op.m, op.k, op.n, op.batch // cores), 0.0)]
    out = [(make(-(-op.m // cores), op.k, op.n, op.batch), 0.0), (make(op.m, op.k, -(-op.n // cores), op.batch), 0.0)]
    if op.k >= 2 * cores:
        out.append((make(op.m, -(-op.k // cores), op.n, op.batch), (cores + 1) * op.m * op.n * op.batch * act_bytes))
    if grid:
        for a in range(2, cores):
            if cores % a:
                continue
            b = cores // a
            out.append((make(-(-op.m // a), op.k, -(-op.n // b), op.batch), 0.0))
            if op.batch % a == 0:
                out += [(make(-(-op.m // b), op.k, op.n, op.batch // a), 0.0),
                        (make(op.m, op.k, -(-op.n // b), op.batch // a), 0.0)]
    return out


def passes(system: SystemConfig, job: LlmJob, split: Split, *, seqs: int, q_len: int, kv_len: int,
           head_tokens: int, layers: int | None = None, head: bool = True,
           cut: CoreSplit | None = None) -> tuple[Pass, Pass]:
    """The forward pass and the backward pass (GEMMs only, no recomputation) of one microbatch of
    ``seqs`` sequences on a stage of ``layers`` layers (default ``layers / pp``) with the LM head
    (``head``: ``head_tokens`` tokens go through it); ``cut`` splits each op over the cores
    (default :func:`core_op`'s rule)."""
    shape = job.shape
    _, act_bytes = operand_bytes(system.chip)
    cut = cut or CoreSplit(system.cores)
    layers = shape.layers // split.pp if layers is None else layers
    fwd_layer = chip_layer_ops(shape, seqs=seqs, q_len=q_len, kv_len=kv_len, tp=split.tp, ep=split.ep,
                               capacity_factor=split.capacity_factor)
    head_op = head_ops(shape, tokens=head_tokens, tp=split.tp) if head else []
    grads = {op: backward(op) for op in fwd_layer + head_op}
    cut.prepare([o for op, bs in grads.items() for o in (op, *bs)])
    tokens = seqs * q_len
    # (a core's op, the chip's op it is cut from): count
    fwd: dict[tuple[Gemm, Gemm], int] = {}
    bwd: dict[tuple[Gemm, Gemm], int] = {}
    core: dict[tuple[Gemm, Gemm], int] = {}
    sums = [0.0, 0.0, 0.0]  # partial-sum bytes of k cuts: forward, backward, attention core
    for ops, count in ((fwd_layer, layers), (head_op, 1)):
        for op in ops:
            c, extra = cut(op)
            fwd[c, op] = fwd.get((c, op), 0) + count
            sums[0] += count * extra
            if op.name in CORE and ops is fwd_layer:
                core[c, op] = core.get((c, op), 0) + count
                sums[2] += count * extra
            for b in grads[op]:
                cb, extra_b = cut(b)
                bwd[cb, b] = bwd.get((cb, b), 0) + count
                sums[1] += count * extra_b
    macs = layers * sum(op.macs for op in fwd_layer) + sum(op.macs for op in head_op)
    core_macs = layers * sum(op.macs for op in fwd_layer if op.name in CORE)
    elements, softmax = _vector_elements(shape, split.tp, kv_len, job.fused_attention,
                                         sequence_parallel=split.sequence_parallel)
    vec = layers * tokens * elements * act_bytes
    core_vec = layers * tokens * softmax * act_bytes
    act = tokens * shape.d * act_bytes
    tp_n = (1 if shape.parallel_block else 2) * layers if split.tp > 1 else 0
    ep_n = 2 * layers if split.ep > 1 else 0
    # each chip sends its tokens' top_k copies (dispatch) and takes them back (combine); with a
    # capacity the buffers go full: capacity_factor times the routed volume
    a2a = tokens * shape.top_k * shape.d * act_bytes * (split.capacity_factor or 1.0)
    p2p = act * split.interleave if split.pp > 1 else 0.0
    def pairs(d: dict[tuple[Gemm, Gemm], int]) -> tuple[tuple[tuple[Gemm, int], ...], tuple[Gemm | None, ...]]:
        # fused attention keeps the attention core's scores and probabilities on chip: no HBM op
        # (its Q, K, V and output are the elementwise traffic's)
        return (tuple((c, n) for (c, _), n in d.items()),
                tuple(None if job.fused_attention and o.name.split(".")[0] in CORE else o for _, o in d))
    (f_ops, f_chip), (b_ops, b_chip), (c_ops, c_chip) = pairs(fwd), pairs(bwd), pairs(core)
    forward = Pass(f_ops, vec + sums[0], act, tp_n, a2a, ep_n, p2p, macs, c_ops, core_vec + sums[2], core_macs,
                   f_chip, c_chip)
    back = Pass(b_ops, 2 * vec + sums[1], act, tp_n, a2a, ep_n, p2p, 2 * macs, chip_ops=b_chip)
    return forward, back
