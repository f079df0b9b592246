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
    exposed  = max(0, dp - m * T_b) with overlap, else dp
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
import math
from dataclasses import dataclass, field
from typing import Any

from accel_dse.config import MEMORY_KINDS, ArrayConfig
from accel_dse.system_config import Split, SystemConfig
from perf_model._memory_parts import effective_dram_bytes_per_cycle
from perf_model.figures.one_design import evaluate
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.pod import collectives as coll
from perf_model.pod.memory import chip_memory, stage_params
from perf_model.pod.steps import Pass, passes
from perf_model.pod.topology import Segment, merge_axes, place, system_axes
from workloads.llm_ops import LlmJob, check_split
from workloads.ops import Gemm, Workload

__all__ = ["SystemResult", "OpCosts", "evaluate_system", "evaluate_split", "candidate_splits", "split_problem",
           "rank_splits", "LINK_PJ_PER_BIT", "SYSTEM_METRICS"]

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
    """Seconds and pJ of each distinct op on one core, from :func:`perf_model.evaluate` (cached)."""

    def __init__(self, chip: ArrayConfig) -> None:
        self.chip = chip
        self._cost: dict[tuple[int, int, int, int], tuple[float, float, str]] = {}
        #: One core's area (the single-chip model's ``area_mm2``), once a feasible op set was evaluated.
        self.area_mm2 = 0.0

    @staticmethod
    def key(op: Gemm) -> tuple[int, int, int, int]:
        return (op.m, op.k, op.n, op.batch)

    def prepare(self, ops: list[Gemm]) -> None:
        """Evaluate, in one vectorised call, every op not seen before."""
        new: dict[tuple[int, int, int, int], Gemm] = {}
        for op in ops:
            k = self.key(op)
            if k not in self._cost and k not in new:
                new[k] = op
        if not new:
            return
        result = evaluate(self.chip, Workload(name="pod ops", ops=tuple(new.values())), reuse=False)
        self.area_mm2 = self.area_mm2 or float(result.total.get("area_mm2", 0.0))
        for k, r in zip(new, result.ops, strict=True):
            self._cost[k] = (r.latency_s, r.energy_pj, "" if r.status == "ok" else r.reason)

    def __call__(self, op: Gemm) -> tuple[float, float, str]:
        return self._cost[self.key(op)]


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


def _time_pass(p: Pass, costs: OpCosts, groups: dict[str, list[Segment]], hbm_bps: float) -> _Timed:
    gemm_s = gemm_pj = 0.0
    reason = ""
    for op, count in p.ops:
        sec, pj, why = costs(op)
        reason = reason or why
        gemm_s += count * sec
        gemm_pj += count * pj
    tp = p.tp_count * coll.all_reduce(groups.get("tp", []), p.tp_allreduce)
    ep_segs = groups.get("ep", [])
    ep = p.ep_count * coll.all_to_all(ep_segs, p.ep_alltoall)
    p2p = coll.p2p(groups.get("pp", []), p.p2p)
    link = 2 * p.tp_count * p.tp_allreduce + p.ep_count * p.ep_alltoall + p.p2p
    return _Timed(gemm_s, gemm_pj, p.vector_bytes / hbm_bps, tp, ep, p2p, link, reason)


def _hbm(system: SystemConfig) -> tuple[float, float]:
    """The chip's HBM bandwidth (bytes/s) and energy per byte (pJ)."""
    chip = system.chip
    per_cycle = float(effective_dram_bytes_per_cycle(chip.dram_bytes_per_cycle, chip.dram, chip.clock_mhz))
    pj = MEMORY_KINDS[chip.dram].pj_per_bit * 8 if chip.dram in MEMORY_KINDS else DEFAULT_ENERGY.dram_pj_per_64b / 8
    return system.cores * per_cycle * chip.clock_mhz * 1e6, pj


def _fail(system: SystemConfig, job: LlmJob, split: Split, reason: str) -> SystemResult:
    return SystemResult("infeasible", reason, system, job, split)


def split_problem(system: SystemConfig, job: LlmJob, split: Split) -> str:
    """Why ``split`` cannot run ``job`` on ``system`` at all (``""`` if it can): chips, model, batch."""
    if split.chips != system.chips:
        return f"the split's dp * tp * pp = {split.chips} must equal the system's chips ({system.chips})"
    why = check_split(job.shape, tp=split.tp, pp=split.pp, ep=split.ep)
    if why:
        return why
    if job.batch % (split.dp * split.microbatch):
        return (f"dp * microbatch = {split.dp} * {split.microbatch} must divide the batch "
                f"({job.batch} sequences)")
    return ""


def evaluate_split(system: SystemConfig, job: LlmJob, split: Split, costs: OpCosts | None = None) -> SystemResult:
    """The job on the system with ``split``; a split that cannot run is ``infeasible`` with a reason."""
    why = split_problem(system, job, split)
    if why:
        return _fail(system, job, split, why)
    groups = place({"tp": split.tp, "ep": split.ep, "dp": split.dp // split.ep, "pp": split.pp}, system_axes(system))
    if isinstance(groups, str):
        return _fail(system, job, split, groups)
    groups["dp_all"] = merge_axes(groups["ep"] + groups["dp"])
    costs = costs or OpCosts(system.chip)
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
    if job.training:
        f, b = passes(system, job, split, seqs=mb, q_len=job.seq, kv_len=job.seq, head_tokens=mb * job.seq)
        return _train(system, job, split, costs, groups, m, memory, f, b, hbm_bps, dram_pj)
    pf, _ = passes(system, job, split, seqs=mb, q_len=job.seq, kv_len=job.seq, head_tokens=mb)
    dec, _ = passes(system, job, split, seqs=mb, q_len=1, kv_len=job.seq + job.gen // 2, head_tokens=mb)
    return _serve(system, job, split, costs, groups, m, memory, pf, dec, hbm_bps, dram_pj)


def _check(costs: OpCosts, *ps: Pass) -> None:
    costs.prepare([op for p in ps for op, _ in p.ops])


def _train(system: SystemConfig, job: LlmJob, split: Split, costs: OpCosts, groups: dict[str, list[Segment]],
           m: int, memory: dict[str, float], f: Pass, b: Pass, hbm_bps: float, dram_pj: float) -> SystemResult:
    _check(costs, f, b)
    tf, tb = _time_pass(f, costs, groups, hbm_bps), _time_pass(b, costs, groups, hbm_bps)
    if tf.reason or tb.reason:
        return SystemResult("infeasible", f"an op does not run on the chip: {tf.reason or tb.reason}", system, job,
                            split, memory=memory)
    r = split.recompute
    fwd_comm = tf.tp_s + tf.ep_s
    t_f = tf.gemm_s + tf.vector_s + fwd_comm + tf.p2p_s
    t_b = tb.gemm_s + tb.vector_s + tb.tp_s + tb.ep_s + tb.p2p_s + r * (tf.gemm_s + tf.vector_s + fwd_comm)
    pipeline = (m + split.pp - 1) * (t_f + t_b)
    width = system.chip.input_bits / 8
    dense, expert = stage_params(job.shape, split, last=True)
    dp = coll.all_reduce(groups["dp_all"], dense * width) + coll.all_reduce(groups["dp"], expert * width)
    if split.zero >= 3:
        dp += (2 + r) * m * (coll.all_gather(groups["dp_all"], dense * width)
                             + coll.all_gather(groups["dp"], expert * width))
    exposed_dp = max(0.0, dp - m * t_b) if split.overlap else dp
    shard = (dense + expert) / (split.dp if split.zero >= 1 else 1)
    optimizer = shard * OPTIMIZER_IO_BYTES / hbm_bps
    step = pipeline + exposed_dp + optimizer
    tokens = job.batch * job.seq
    chips = system.chips
    peak_flops = 2.0 * system.peak_macs_per_s * chips
    model_flops = tokens * job.shape.model_flops_per_token(job.seq, training=True)
    hw_macs = (f.model_macs * (1 + r) + b.model_macs) * m * split.dp * split.pp * split.tp
    gemm = m * (tf.gemm_s * (1 + r) + tb.gemm_s)
    vector = m * (tf.vector_s * (1 + r) + tb.vector_s)
    comm_mb = m * (fwd_comm * (1 + r) + tb.tp_s + tb.ep_s + tf.p2p_s + tb.p2p_s)
    link_bytes = m * (tf.link_bytes * (1 + r) + tb.link_bytes) + 2 * (dense + expert) * width
    energy_pj = (m * (tf.gemm_pj * (1 + r) + tb.gemm_pj) * system.cores
                 + (m * (f.vector_bytes * (1 + r) + b.vector_bytes) + shard * OPTIMIZER_IO_BYTES) * dram_pj
                 + link_bytes * 8 * LINK_PJ_PER_BIT) * chips
    metrics = {
        "step_s": step, "mfu": model_flops / (step * peak_flops), "hfu": 2.0 * hw_macs / (step * peak_flops),
        "tokens_per_s": tokens / step, "tokens_per_s_per_chip": tokens / step / chips,
        "ttft_s": 0.0, "tpot_s": 0.0, "energy_j": energy_pj * 1e-12, "microbatches": float(m),
    }
    breakdown = {"compute_s": gemm, "vector_s": vector, "exposed_comm_s": comm_mb + exposed_dp,
                 "bubble_s": (split.pp - 1) * (t_f + t_b), "optimizer_s": optimizer, "dp_comm_s": dp}
    return SystemResult("ok", "", system, job, split, metrics, breakdown, memory)


def _serve(system: SystemConfig, job: LlmJob, split: Split, costs: OpCosts, groups: dict[str, list[Segment]],
           m: int, memory: dict[str, float], pf: Pass, dec: Pass, hbm_bps: float, dram_pj: float) -> SystemResult:
    _check(costs, pf, dec)
    tp_, td_ = _time_pass(pf, costs, groups, hbm_bps), _time_pass(dec, costs, groups, hbm_bps)
    if tp_.reason or td_.reason:
        return SystemResult("infeasible", f"an op does not run on the chip: {tp_.reason or td_.reason}", system,
                            job, split, memory=memory)
    t_p = tp_.gemm_s + tp_.vector_s + tp_.tp_s + tp_.ep_s + tp_.p2p_s
    t_d = td_.gemm_s + td_.vector_s + td_.tp_s + td_.ep_s + td_.p2p_s
    pp = split.pp
    ttft = pp * t_p
    tpot = max(m, pp) * t_d
    steps = job.gen - 1
    total = (m + pp - 1) * t_p + steps * tpot
    chips = system.chips
    shape = job.shape
    ctx = job.seq + job.gen // 2
    model_flops = job.batch * (job.seq * shape.model_flops_per_token(job.seq, training=False)
                               + steps * shape.model_flops_per_token(ctx, training=False))
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


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidate_splits(system: SystemConfig, job: LlmJob, *, microbatches: tuple[int, ...] = (1, 2, 4, 8, 16),
                     zeros: tuple[int, ...] | None = None, recompute: tuple[float, ...] | None = None,
                     overlap: bool = True) -> list[Split]:
    """Every split the search tries: ``tp``, ``pp``, ``ep`` (MoE) dividing the chips and the model,
    ``dp`` the rest, ``microbatch`` dividing each replica's sequences, ZeRO 0/1/3 and recomputation
    0/1 in training."""
    chips = system.chips
    shape = job.shape
    zeros = zeros if zeros is not None else ((0, 1, 3) if job.training else (0,))
    recompute = recompute if recompute is not None else ((0.0, 1.0) if job.training else (0.0,))
    out = []
    for tp, pp in itertools.product(_divisors(chips), repeat=2):
        if chips % (tp * pp) or check_split(shape, tp=tp, pp=pp, ep=1):
            continue
        dp = chips // (tp * pp)
        eps = [e for e in _divisors(dp) if shape.moe and shape.experts % e == 0] or [1]
        for ep, mb, zero, rc in itertools.product(eps, microbatches, zeros, recompute):
            if job.batch % (dp * mb):
                continue
            out.append(Split(dp=dp, tp=tp, pp=pp, ep=ep, zero=zero, microbatch=mb, recompute=rc, overlap=overlap))
    return out


def _objective(result: SystemResult) -> float:
    if result.job.training:
        return result.metrics["step_s"]
    return 1.0 / result.metrics["tokens_per_s"]


def rank_splits(system: SystemConfig, job: LlmJob, splits: list[Split] | None = None,
                costs: OpCosts | None = None) -> list[SystemResult]:
    """Every split of ``splits`` (default: :func:`candidate_splits`) evaluated, the feasible ones
    first, fastest first (training: step time; serving: tokens/s), then the infeasible ones by
    the memory they need (``costs``: op times of the system's chip already known)."""
    costs = costs if costs is not None and costs.chip == system.chip else OpCosts(system.chip)
    tries = splits if splits is not None else candidate_splits(system, job)
    results = [evaluate_split(system, job, s, costs) for s in tries]
    return sorted(results, key=lambda r: (0, _objective(r)) if r.ok else (1, r.memory.get("total", math.inf)))


def evaluate_system(system: SystemConfig, job: LlmJob, split: Split | None = None, *,
                    splits: list[Split] | None = None) -> SystemResult:
    """The job on the system: with ``split`` that split, else the best of ``splits`` (default:
    :func:`candidate_splits`) by step time (training) or tokens/s (serving). When none fits, the
    result is infeasible with the reason of the split that needed the least memory."""
    if split is not None:
        return evaluate_split(system, job, split)
    ranked = rank_splits(system, job, splits)
    if not ranked:
        return _fail(system, job, Split(dp=system.chips), f"no split of {system.chips} chips fits {job.shape.name}")
    return dataclasses.replace(ranked[0], searched=len(ranked))
