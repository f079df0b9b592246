"""What one chip does in one pass of one microbatch: its GEMMs, its elementwise HBM traffic and
its collectives (pure functions; the op records come from :mod:`workloads.llm_ops`).

A pass is timed on one stage: ``layers`` layers (:func:`perf_model.pod.stages.stage_layers`),
with the LM head on the last stage. A pass is:

* GEMMs: ``layers / pp`` times the layer's ops (:func:`workloads.llm_ops.layer_ops`), plus the LM
  head; the backward pass has each forward GEMM's two backward GEMMs. Each op is split over the
  chip's ``cores`` (:func:`core_op`).
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
  (dispatch and combine, ``top_k`` copies of each token); per microbatch one point-to-point send
  of the activations to the next stage (and of their gradient back); ``interleave`` sends per
  microbatch with the interleaved schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accel_dse.system_config import Split, SystemConfig
from workloads.llm_ops import LlmJob, LlmShape, backward, head_ops, layer_ops
from workloads.ops import Gemm, Requant

__all__ = ["Pass", "core_op", "passes", "OUTPUT"]

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


def passes(system: SystemConfig, job: LlmJob, split: Split, *, seqs: int, q_len: int, kv_len: int,
           head_tokens: int, layers: int | None = None, head: bool = True) -> tuple[Pass, Pass]:
    """The forward pass and the backward pass (GEMMs only, no recomputation) of one microbatch of
    ``seqs`` sequences on a stage of ``layers`` layers (default ``layers / pp``) with the LM head
    (``head``: ``head_tokens`` tokens go through it)."""
    shape = job.shape
    act_bytes = system.chip.input_bits / 8
    layers = shape.layers // split.pp if layers is None else layers
    fwd_layer = layer_ops(shape, seqs=seqs, q_len=q_len, kv_len=kv_len, tp=split.tp, ep=split.ep)
    head_op = head_ops(shape, tokens=head_tokens, tp=split.tp) if head else []
    tokens = seqs * q_len
    fwd: dict[Gemm, int] = {}
    bwd: dict[Gemm, int] = {}
    core: dict[Gemm, int] = {}
    for ops, count in ((fwd_layer, layers), (head_op, 1)):
        for op in ops:
            c = core_op(op, system.cores)
            fwd[c] = fwd.get(c, 0) + count
            if op.name in CORE and ops is fwd_layer:
                core[c] = core.get(c, 0) + count
            for b in backward(op):
                cb = core_op(b, system.cores)
                bwd[cb] = bwd.get(cb, 0) + count
    macs = layers * sum(op.macs for op in fwd_layer) + sum(op.macs for op in head_op)
    core_macs = layers * sum(op.macs for op in fwd_layer if op.name in CORE)
    elements, softmax = _vector_elements(shape, split.tp, kv_len, job.fused_attention,
                                         sequence_parallel=split.sequence_parallel)
    vec = layers * tokens * elements * act_bytes
    core_vec = layers * tokens * softmax * act_bytes
    act = tokens * shape.d * act_bytes
    tp_n = (1 if shape.parallel_block else 2) * layers if split.tp > 1 else 0
    ep_n = 2 * layers if split.ep > 1 else 0
    a2a = tokens * shape.top_k * shape.d * act_bytes
    p2p = act * split.interleave if split.pp > 1 else 0.0
    forward = Pass(tuple(fwd.items()), vec, act, tp_n, a2a, ep_n, p2p, macs, tuple(core.items()), core_vec, core_macs)
    back = Pass(tuple(bwd.items()), 2 * vec, act, tp_n, a2a, ep_n, p2p, 2 * macs)
    return forward, back
