"""A system on an LLM job: step time, MFU, tokens/s, TTFT/TPOT, memory, energy, the split (pure).

Per-chip op times are the single-chip model's (:func:`perf_model.evaluate` of one core on the
op, ``reuse=False``: the LLM's ops are independent), the same numbers ``accel-dse evaluate``
gives for that op; each distinct op is evaluated once per call (:class:`OpCosts`).

Training, for ``m = batch / dp / microbatch`` microbatches and the last stage's passes
(:mod:`perf_model.pod.steps`; times in seconds)::

    T_f = gemm_f + vector_f + tp_f + ep_f + p2p           (one microbatch, forward)
    T_b = gemm_b + vector_b + tp_b + ep_b + p2p + r * (gemm_f + vector_f + tp_f + ep_f)
    pipeline = (m + pp - 1) * (T_f + T_b)                  (1F1B; bubble = (pp - 1) * (T_f + T_b))
    dp       = all-reduce of the stage's gradients over dp (experts' over dp / ep); ZeRO 3 adds an
               all-gather of the stage's weights per microbatch and pass (2 + r)
    exposed  = max(0, dp - m * T_b) with overlap, else dp (T_b less the backward's tensor-parallel
               and expert collectives when they share links with dp: data_parallel.exposed_s)
    optimizer = 28 bytes per weight of the chip's optimizer shard through HBM (Adam in fp32:
               read master, m, v, gradient; write master, m, v, bf16 copy)
    step = pipeline + exposed + optimizer

Serving: ``m = batch / dp / microbatch`` microbatches; ``T_p`` a prefill pass of one microbatch
(prompts of ``seq``), ``T_d`` a decode step (one token per sequence against a mean context of
``seq + gen / 2``)::

    TTFT  = pp * T_p
    TPOT  = max(m, pp) * T_d
    total = (m + pp - 1) * T_p + (gen - 1) * TPOT

Tensor-parallel all-reduces, expert all-to-alls and pipeline sends are not overlapped with
compute (Megatron-style); elementwise work runs at the chip's HBM bandwidth. MFU is model FLOPs
(:meth:`LlmShape.model_flops_per_token`) over ``time * chips * 2 * peak MACs/s``; HFU counts the
executed MACs (recomputation included). Energy: the chips' op energies from the single-chip model,
elementwise traffic at the chip's DRAM energy per byte, and every byte a chip sends over a link
at :data:`LINK_PJ_PER_BIT`.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any

from accel_spec.config import NO_MEMORY, ArrayConfig
from accel_spec.errors import WorkloadError
from accel_spec.pod_config import Split, SystemConfig
from perf_model._memory_parts import dram_pj_per_byte, effective_dram_bytes_per_cycle
from perf_model.figures.one_design import evaluate
from perf_model.pod import collectives as coll
from perf_model.pod.data_parallel import data_parallel_s, exposed_s, shared_axes
from perf_model.pod.memory import chip_memory, stage_params
from perf_model.pod.stages import bubble_s, pipeline_s, schedule_problem, stage_layers
from perf_model.pod.steps import CoreSplit, Pass, operand_bytes, passes
from perf_model.pod.topology import Segment, merge_axes, place, system_axes
from workloads.llm_ops import LlmJob, check_split
from workloads.ops import Gemm, Workload

__all__ = ["SystemResult", "OpCosts", "evaluate_split", "failed_result", "split_problem", "training_problem",
           "l2_chips", "LINK_PJ_PER_BIT", "SYSTEM_METRICS"]

#: Energy per bit sent over an inter-chip or DCN link, pJ (an assumption: off-package SerDes are
#: quoted at a few to ~10 pJ/bit; stated, not fitted).
LINK_PJ_PER_BIT = 10.0
#: Bytes through HBM per weight of the optimizer shard in one Adam update (see the module docstring).
OPTIMIZER_IO_BYTES = 28


#: Metrics of :meth:`SystemResult.flat_metrics` and their units.
SYSTEM_METRICS: dict[str, str] = {
    "step_s": "s", "mfu": "fraction", "tokens_per_s": "tokens/s", "tokens_per_s_per_chip": "tokens/s",
    "ttft_s": "s", "tpot_s": "s", "hbm_used_gib": "GiB", "system_energy_j": "J", "exposed_comm_s": "s",
    "bubble_s": "s",
}


@dataclass(frozen=True)
class SystemResult:
    """One system, job and split: ``status`` ``ok`` or ``infeasible`` (``reason`` says why).

    ``metrics`` (seconds, bytes, joules): ``step_s`` (a training step, or the whole serving run),
    ``mfu``, ``hfu``, ``tokens_per_s``, ``tokens_per_s_per_chip``, ``ttft_s`` and ``tpot_s``
    (serving), ``energy_j``; ``breakdown``: ``compute_s``, ``vector_s``, ``exposed_comm_s``,
    ``bubble_s``, ``optimizer_s``; ``memory``: bytes per chip by part and ``hbm_bytes``.
    """

    status: str
    reason: str
    system: SystemConfig
    job: LlmJob
    split: Split
    metrics: dict[str, float] = field(default_factory=dict)
    breakdown: dict[str, float] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    searched: int = 1

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def flat_metrics(self) -> dict[str, float]:
        """The figures a sweep can optimise or bound, by name (:data:`SYSTEM_METRICS`; 0 when infeasible)."""
        ok = self.ok
        m, b = self.metrics, self.breakdown
        values = {
            "step_s": m.get("step_s", 0.0), "mfu": m.get("mfu", 0.0), "tokens_per_s": m.get("tokens_per_s", 0.0),
            "tokens_per_s_per_chip": m.get("tokens_per_s_per_chip", 0.0), "ttft_s": m.get("ttft_s", 0.0),
            "tpot_s": m.get("tpot_s", 0.0), "hbm_used_gib": self.memory.get("total", 0.0) / 2**30,
            "system_energy_j": m.get("energy_j", 0.0), "exposed_comm_s": b.get("exposed_comm_s", 0.0),
            "bubble_s": b.get("bubble_s", 0.0),
        }
        return {k: float(v) if ok else 0.0 for k, v in values.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "job": self.job.name, "mode": self.job.mode,
                "chips": self.system.chips, "split": self.split.to_dict(), "splits_searched": self.searched,
                "metrics": dict(self.metrics), "breakdown": dict(self.breakdown), "memory": dict(self.memory),
                "system": self.system.to_dict()}


class OpCosts:
    """Seconds and pJ of each distinct op on one core, from :func:`perf_model.evaluate` (cached).

    With ``l2`` (a design whose buffers are the chip's shared cache, :func:`l2_chips`) an op also
    has the HBM bytes the whole chip's op moves with that cache (:meth:`seconds`: the slower of
    the core's time and those bytes at ``hbm_bps``)."""

    def __init__(self, chip: ArrayConfig, *, l2: ArrayConfig | None = None, hbm_bps: float = 0.0) -> None:
        self.chip = chip
        self._cost: dict[tuple[int, int, int, int], tuple[float, float, str, float]] = {}
        #: One core's area (the single-chip model's ``area_mm2``), once a feasible op set was evaluated.
        self.area_mm2 = 0.0
        self._cuts: dict[tuple[int, float, float], CoreSplit] = {}
        self.l2 = OpCosts(l2) if l2 is not None else None
        self.hbm_bps = hbm_bps

    @classmethod
    def for_system(cls, system: SystemConfig) -> OpCosts:
        """The op costs of ``system``'s chip (its cores and, with ``l2_mib``, its shared cache)."""
        port, l2 = l2_chips(system)
        return cls(port, l2=l2, hbm_bps=_hbm(system)[0] if l2 is not None else 0.0)

    def matches(self, system: SystemConfig) -> bool:
        """Whether these costs are those of ``system``'s chip."""
        port, l2 = l2_chips(system)
        return self.chip == port and (self.l2.chip if self.l2 is not None else None) == l2

    def core_split(self, cores: int, hbm_bps: float, act_bytes: float) -> CoreSplit:
        """The :class:`CoreSplit` of a chip of ``cores`` on these costs (one per chip, its choices kept)."""
        key = (cores, hbm_bps, act_bytes)
        if key not in self._cuts:
            self._cuts[key] = CoreSplit(cores, self, hbm_bps, act_bytes, grid=self.l2 is not None)
        return self._cuts[key]

    @staticmethod
    def key(op: Gemm) -> tuple[int, int, int, int]:
        return (op.m, op.k, op.n, op.batch)

    def prepare(self, ops: list[Gemm], chip_ops: list[Gemm] | None = None) -> None:
        """Evaluate, in one vectorised call, every op not seen before (``chip_ops`` on the shared cache)."""
        if self.l2 is not None and chip_ops:
            self.l2.prepare(chip_ops)
        new: dict[tuple[int, int, int, int], Gemm] = {}
        for op in ops:
            k = self.key(op)
            if k not in self._cost and k not in new:
                new[k] = op
        # the single-chip model sums a workload's MACs exactly below 2**48: batches of ops under that
        batches: list[list[tuple[tuple[int, int, int, int], Gemm]]] = [[]]
        macs = 0
        for k, op in new.items():
            if batches[-1] and macs + op.macs >= 1 << 47:
                batches.append([])
                macs = 0
            batches[-1].append((k, op))
            macs += op.macs
        for batch in filter(None, batches):
            result = evaluate(self.chip, Workload(name="pod ops", ops=tuple(o for _, o in batch)), reuse=False)
            self.area_mm2 = self.area_mm2 or float(result.total.get("area_mm2", 0.0))
            for (key, _), r in zip(batch, result.ops, strict=True):
                self._cost[key] = (r.latency_s, r.energy_pj, "" if r.status == "ok" else r.reason,
                                   float(r.dram_read_bytes + r.dram_write_bytes))

    def __call__(self, op: Gemm) -> tuple[float, float, str]:
        sec, pj, why, _ = self._cost[self.key(op)]
        return sec, pj, why

    def dram_bytes(self, op: Gemm) -> float:
        """Bytes ``op`` moves through DRAM on this design."""
        return self._cost[self.key(op)][3]

    def seconds(self, op: Gemm, chip_op: Gemm | None) -> tuple[float, float, str]:
        """:meth:`__call__`, with a shared cache no faster than the chip op's HBM bytes at ``hbm_bps``."""
        sec, pj, why = self(op)
        if self.l2 is not None and chip_op is not None:
            sec = max(sec, self.l2.dram_bytes(chip_op) / self.hbm_bps)
        return sec, pj, why


def l2_chips(system: SystemConfig) -> tuple[ArrayConfig, ArrayConfig | None]:
    """The design each core's ops are timed on, and the design whose DRAM traffic is the chip's HBM
    traffic (``None`` without a shared cache, ``SystemConfig.l2_mib``).

    With a shared cache a core streams its operands from it: the design with
    ``l2_gb_per_s / cores`` as its bandwidth (no memory part). HBM serves the whole chip's op
    with the cache as its buffers: the design with ``l2_mib / 3`` for each of its three buffers."""
    chip = system.chip
    if system.l2_mib <= 0:
        return chip, None
    port = system.l2_gb_per_s * 1e9 / system.cores / (chip.clock_mhz * 1e6)
    third = max(1, int(system.l2_mib * 1024 / 3))
    return (dataclasses.replace(chip, dram_bytes_per_cycle=port, dram=NO_MEMORY),
            dataclasses.replace(chip, ifmap_sram_kib=third, weight_sram_kib=third, ofmap_sram_kib=third))


@dataclass(frozen=True)
class _Timed:
    gemm_s: float
    gemm_pj: float
    vector_s: float
    tp_s: float
    ep_s: float
    p2p_s: float
    link_bytes: float
    reason: str
    core_s: float = 0.0
    core_pj: float = 0.0

    @property
    def total_s(self) -> float:
        return self.gemm_s + self.vector_s + self.tp_s + self.ep_s + self.p2p_s


def _time_pass(p: Pass, costs: OpCosts, groups: dict[str, list[Segment]], hbm_bps: float) -> _Timed:
    gemm_s = gemm_pj = 0.0
    reason = ""
    for (op, count), chip_op in itertools.zip_longest(p.ops, p.chip_ops):
        sec, pj, why = costs.seconds(op, chip_op)
        reason = reason or why
        gemm_s += count * sec
        gemm_pj += count * pj
    tp = p.tp_count * coll.all_reduce(groups.get("tp", []), p.tp_allreduce)
    ep_segs = groups.get("ep", [])
    ep = p.ep_count * coll.all_to_all(ep_segs, p.ep_alltoall)
    p2p = coll.p2p(groups.get("pp", []), p.p2p)
    link = 2 * p.tp_count * p.tp_allreduce + p.ep_count * p.ep_alltoall + p.p2p
    core_s = core_pj = 0.0
    for (op, count), chip_op in itertools.zip_longest(p.core_ops, p.core_chip_ops):
        sec, pj, _ = costs.seconds(op, chip_op)
        core_s += count * sec
        core_pj += count * pj
    return _Timed(gemm_s, gemm_pj, p.vector_bytes / hbm_bps, tp, ep, p2p, link, reason,
                  core_s + p.core_vector_bytes / hbm_bps, core_pj)


def _hbm(system: SystemConfig) -> tuple[float, float]:
    """The chip's HBM bandwidth (bytes/s) and energy per byte (pJ)."""
    chip = system.chip
    per_cycle = float(effective_dram_bytes_per_cycle(chip.dram_bytes_per_cycle, chip.dram, chip.clock_mhz))
    pj = float(dram_pj_per_byte(chip.dram))  # 0 for "none", ideal memory
    return system.cores * per_cycle * chip.clock_mhz * 1e6, pj


def failed_result(system: SystemConfig, job: LlmJob, split: Split, reason: str) -> SystemResult:
    return SystemResult("infeasible", reason, system, job, split)


def training_problem(system: SystemConfig) -> str:
    """Why the system's chip cannot train (``""`` if it can): gradients and weight updates need
    operands of at least 16 bits or a floating-point format; an integer operand narrower than 16
    bits (an int8 or int4 inference chip, as TPU v1) is refused for training, with the reason."""
    chip = system.chip
    for role, fmt in (("weight", chip.weight_fmt), ("activation", chip.act_fmt)):
        if fmt.is_int and fmt.bits < 16:
            return (f"the chip's {role} operands are {fmt.name} ({fmt.bits}-bit integers): training needs "
                    "16-bit or floating-point operands for its gradients (serve this chip instead)")
    return ""


def split_problem(system: SystemConfig, job: LlmJob, split: Split) -> str:
    """Why ``split`` cannot run ``job`` on ``system`` at all (``""`` if it can): chips, model, batch."""
    if split.chips != system.chips:
        return f"the split's dp * tp * pp = {split.chips} must equal the system's chips ({system.chips})"
    # tp need not divide the heads (the projections' columns and the attention's (sequence, head)
    # pairs are split instead, steps.chip_layer_ops); it must divide the FFN width
    why = check_split(job.shape, tp=1, pp=1, ep=split.ep)
    if why:
        return why
    if split.capacity_factor and not job.shape.moe:
        return (f"capacity_factor={split.capacity_factor:g} needs a mixture-of-experts model "
                f"({job.shape.name} is dense)")
    width = job.shape.expert_ffn if job.shape.moe else job.shape.ffn
    if width % split.tp:
        return f"tp={split.tp} must divide the model's FFN width ({width})"
    if job.batch % (split.dp * split.microbatch):
        return (f"dp * microbatch = {split.dp} * {split.microbatch} must divide the batch "
                f"({job.batch} sequences)")
    return schedule_problem(job.shape.layers, split, job.batch // (split.dp * split.microbatch))


def evaluate_split(system: SystemConfig, job: LlmJob, split: Split, costs: OpCosts | None = None) -> SystemResult:
    """The job on the system with ``split``; a split that cannot run is ``infeasible`` with a reason."""
    why = split_problem(system, job, split)
    if why:
        return failed_result(system, job, split, why)
    if job.training:
        why = training_problem(system)
        if why:
            return failed_result(system, job, split, why)
    groups = place({"tp": split.tp, "ep": split.ep, "dp": split.dp // split.ep, "pp": split.pp}, system_axes(system))
    if isinstance(groups, str):
        return failed_result(system, job, split, groups)
    groups["dp_all"] = merge_axes(groups["ep"] + groups["dp"])
    costs = costs if costs is not None and costs.matches(system) else OpCosts.for_system(system)
    seqs = job.batch // split.dp
    m = seqs // split.microbatch
    memory = chip_memory(system, job, split, m)
    memory["hbm_bytes"] = system.hbm_bytes
    if memory["total"] > system.hbm_bytes:
        parts = ", ".join(f"{k} {v / 2**30:.3g}" for k, v in memory.items() if k not in ("total", "hbm_bytes") and v)
        return SystemResult("infeasible", f"needs {memory['total'] / 2**30:.3g} GiB per chip ({parts}), more than "
                            f"the {system.hbm_gib:g} GiB of HBM", system, job, split, memory=memory)
    hbm_bps, dram_pj = _hbm(system)
    mb = split.microbatch
    cut = costs.core_split(system.cores, hbm_bps, operand_bytes(system.chip)[1])
    counts = stage_layers(job.shape.layers, split.pp)
    # the last stage (LM head) and, when it holds more layers, the fullest other stage
    kinds = [(counts[-1], True)] + ([(max(counts[:-1]), False)] if split.pp > 1 and max(counts[:-1]) > counts[-1]
                                    else [])
    try:
        if job.training:
            stages = [passes(system, job, split, seqs=mb, q_len=job.seq, kv_len=job.seq, head_tokens=mb * job.seq,
                             layers=n, head=h, cut=cut) for n, h in kinds]
            return _train(system, job, split, costs, groups, m, memory, stages, hbm_bps, dram_pj)
        ctx = job.seq + job.gen // 2
        stages = [(passes(system, job, split, seqs=mb, q_len=job.seq, kv_len=job.seq, head_tokens=mb, layers=n,
                          head=h, cut=cut)[0],
                   passes(system, job, split, seqs=mb, q_len=1, kv_len=ctx, head_tokens=mb, layers=n, head=h,
                          cut=cut)[0])
                  for n, h in kinds]
        return _serve(system, job, split, costs, groups, m, memory, stages, hbm_bps, dram_pj)
    except WorkloadError as exc:  # an op of the microbatch beyond what the chip model computes exactly
        return SystemResult("infeasible", f"microbatch {mb}: {exc}", system, job, split, memory=memory)


def _check(costs: OpCosts, *ps: Pass) -> None:
    costs.prepare([op for p in ps for op, _ in (*p.ops, *p.core_ops)],
                  [op for p in ps for op in (*p.chip_ops, *p.core_chip_ops) if op is not None])


def _train(system: SystemConfig, job: LlmJob, split: Split, costs: OpCosts, groups: dict[str, list[Segment]],
           m: int, memory: dict[str, float], stages: list[tuple[Pass, Pass]], hbm_bps: float,
           dram_pj: float) -> SystemResult:
    _check(costs, *(p for fb in stages for p in fb))
    r = split.recompute
    timed = []
    for f, b in stages:
        tf, tb = _time_pass(f, costs, groups, hbm_bps), _time_pass(b, costs, groups, hbm_bps)
        if tf.reason or tb.reason:
            return SystemResult("infeasible", f"an op does not run on the chip: {tf.reason or tb.reason}", system,
                                job, split, memory=memory)
        redo = tf.core_s if split.selective else r * (tf.gemm_s + tf.vector_s + tf.tp_s + tf.ep_s)
        timed.append((tf.total_s, tb.total_s + redo, f, b, tf, tb))
    # the bottleneck stage: every stage runs in step with the slowest
    t_f, t_b, f, b, tf, tb = max(timed, key=lambda t: t[0] + t[1])
    fwd_comm = tf.tp_s + tf.ep_s
    pipeline = pipeline_s(split, m, t_f + t_b)
    width, _ = operand_bytes(system.chip)
    dense, expert = stage_params(job.shape, split, last=True)
    dp = data_parallel_s(system, job.shape, split, groups, dense, expert, stage_layers(job.shape.layers, split.pp)[-1],
                         m)
    shared = shared_axes(groups)
    busy_f = (tf.tp_s if "tp" in shared else 0.0) + (tf.ep_s if "ep" in shared else 0.0)
    busy_b = (tb.tp_s if "tp" in shared else 0.0) + (tb.ep_s if "ep" in shared else 0.0)
    exposed_dp = exposed_s(split, dp, m, t_f, t_b, busy_f, busy_b + busy_f * r)
    shard = (dense + expert) / (split.dp if split.zero >= 1 else 1)
    optimizer = shard * OPTIMIZER_IO_BYTES / hbm_bps
    step = pipeline + exposed_dp + optimizer
    tokens = job.batch * job.seq
    chips = system.chips
    peak_flops = 2.0 * system.peak_macs_per_s * chips
    model_flops = tokens * job.shape.model_flops_per_token(job.seq, training=True)
    redo_macs = f.core_macs if split.selective else r * f.model_macs
    hw_macs = (f.model_macs + redo_macs + b.model_macs) * m * split.dp * split.pp * split.tp
    core_gemm = tf.core_s - f.core_vector_bytes / hbm_bps
    gemm = m * (tf.gemm_s * (1 + r) + tb.gemm_s + (core_gemm if split.selective else 0.0))
    vector = m * (tf.vector_s * (1 + r) + tb.vector_s
                  + (f.core_vector_bytes / hbm_bps if split.selective else 0.0))
    comm_mb = m * (fwd_comm * (1 + r) + tb.tp_s + tb.ep_s + tf.p2p_s + tb.p2p_s)
    link_bytes = m * (tf.link_bytes * (1 + r) + tb.link_bytes) + 2 * (dense + expert) * width
    redo_pj = tf.core_pj if split.selective else r * tf.gemm_pj
    redo_vec = f.core_vector_bytes if split.selective else r * f.vector_bytes
    energy_pj = (m * (tf.gemm_pj + redo_pj + tb.gemm_pj) * system.cores
                 + (m * (f.vector_bytes + redo_vec + b.vector_bytes) + shard * OPTIMIZER_IO_BYTES) * dram_pj
                 + link_bytes * 8 * LINK_PJ_PER_BIT) * chips
    metrics = {
        "step_s": step, "mfu": model_flops / (step * peak_flops), "hfu": 2.0 * hw_macs / (step * peak_flops),
        "tokens_per_s": tokens / step, "tokens_per_s_per_chip": tokens / step / chips,
        "ttft_s": 0.0, "tpot_s": 0.0, "energy_j": energy_pj * 1e-12, "microbatches": float(m),
    }
    breakdown = {"compute_s": gemm, "vector_s": vector, "exposed_comm_s": comm_mb + exposed_dp,
                 "bubble_s": bubble_s(split, t_f + t_b), "optimizer_s": optimizer, "dp_comm_s": dp}
    return SystemResult("ok", "", system, job, split, metrics, breakdown, memory)


def _serve(system: SystemConfig, job: LlmJob, split: Split, costs: OpCosts, groups: dict[str, list[Segment]],
           m: int, memory: dict[str, float], stages: list[tuple[Pass, Pass]], hbm_bps: float,
           dram_pj: float) -> SystemResult:
    _check(costs, *(p for pd in stages for p in pd))
    timed = []
    for pf, dec in stages:
        tp_, td_ = _time_pass(pf, costs, groups, hbm_bps), _time_pass(dec, costs, groups, hbm_bps)
        if tp_.reason or td_.reason:
            return SystemResult("infeasible", f"an op does not run on the chip: {tp_.reason or td_.reason}", system,
                                job, split, memory=memory)
        timed.append((pf, dec, tp_, td_))
    # the bottleneck stage of each phase
    pf, tp_ = max(((p, t) for p, _, t, _ in timed), key=lambda pt: pt[1].total_s)
    dec, td_ = max(((d, t) for _, d, _, t in timed), key=lambda dt: dt[1].total_s)
    t_p, t_d = tp_.total_s, td_.total_s
    pp = split.pp
    ttft = pp * t_p
    tpot = max(m, pp) * t_d
    steps = job.gen - 1
    total = (m + pp - 1) * t_p + steps * tpot
    chips = system.chips
    shape = job.shape
    ctx = job.seq + job.gen // 2
    # prefill runs the LM head for each sequence's last prompt token only
    prefill_flops = (job.seq * shape.model_flops_per_token(job.seq, training=False)
                     - (job.seq - 1) * 2.0 * shape.head_params)
    model_flops = job.batch * (prefill_flops + steps * shape.model_flops_per_token(ctx, training=False))
    hw_macs = (pf.model_macs * m + dec.model_macs * m * steps) * split.dp * pp * split.tp
    peak_flops = 2.0 * system.peak_macs_per_s * chips
    tokens = job.batch * job.gen
    # every stage runs every microbatch once per prefill and once per decode step
    stage_runs_p, stage_runs_d = m, m * steps
    gemm = stage_runs_p * tp_.gemm_s + stage_runs_d * td_.gemm_s
    vector = stage_runs_p * tp_.vector_s + stage_runs_d * td_.vector_s
    comm = (stage_runs_p * (tp_.tp_s + tp_.ep_s + tp_.p2p_s) + stage_runs_d * (td_.tp_s + td_.ep_s + td_.p2p_s))
    link_bytes = stage_runs_p * tp_.link_bytes + stage_runs_d * td_.link_bytes
    energy_pj = ((stage_runs_p * tp_.gemm_pj + stage_runs_d * td_.gemm_pj) * system.cores
                 + (stage_runs_p * pf.vector_bytes + stage_runs_d * dec.vector_bytes) * dram_pj
                 + link_bytes * 8 * LINK_PJ_PER_BIT) * chips
    metrics = {
        "step_s": total, "mfu": model_flops / (total * peak_flops), "hfu": 2.0 * hw_macs / (total * peak_flops),
        "tokens_per_s": tokens / total, "tokens_per_s_per_chip": tokens / total / chips,
        "decode_tokens_per_s": job.batch / tpot, "ttft_s": ttft, "tpot_s": tpot, "energy_j": energy_pj * 1e-12,
        "microbatches": float(m),
    }
    breakdown = {"compute_s": gemm, "vector_s": vector, "exposed_comm_s": comm,
                 "bubble_s": max(0.0, total - gemm - vector - comm), "optimizer_s": 0.0}
    return SystemResult("ok", "", system, job, split, metrics, breakdown, memory)
