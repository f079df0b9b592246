"""The pods model on a training set and on a held-out set of published runs, apart.

Training set (the points the model and the presets were built against, ``bench/pod_validation_train.py``):
the Megatron-LM table (Narayanan et al. SC 2021, Table 1, 10 points), MT-NLG 530B and PaLM 540B.

Held-out set (never used to set any parameter; each point's setup is the paper's, and the model
chooses only the microbatch where the paper does not give it, or the split where the paper does
not publish one, as the ``splits`` column says):

====================  ==========================================================================
point                 source
====================  ==========================================================================
OPT-175B              Zhang et al., "OPT", 2022, sec. 2.4: 992 80 GB A100, FSDP with Megatron
                      tensor parallel 8, 147 TFLOP/s per GPU; shape Table 1 (96 layers, d 12288,
                      96 heads), batch 2 M tokens (here 992 sequences of 2,048: 8 per replica)
BLOOM-176B            BigScience, "BLOOM", 2022, sec. 3.4: 384 80 GB A100 (48 nodes), tensor 4,
                      pipeline 12, data 8, ZeRO-1, micro batch 2, batch 2,048 of 2,048, 70 layers,
                      d 14336, 112 heads, vocab 250,880; 149.8 TFLOP/s per GPU (figure as issue 51
                      gives it)
LLaMA-65B             Touvron et al., "LLaMA", 2023, sec. 2.4: 2,048 80 GB A100, batch 4 M tokens
                      (2,048 x 2,048), 380 tokens/s/GPU; split not published (searched: tp 2-8,
                      pp 1-8), fused attention (xformers)
Gopher-280B           Rae et al. 2021 (setup: 4,096 TPU v3 in 4 pods, pipelined across pods,
                      model parallel in a pod, ZeRO, rematerialisation; tensor 8 assumed), MFU
                      32.5 % as Chowdhery et al. 2022 (PaLM), Table 3 gives it; batch 1,536 x 2,048
Korthikanti GPT       Korthikanti et al., "Reducing activation recomputation", 2022, Table 3
                      (setups: tensor 8; pipeline 8 / 35 / 64; 64 / 280 / 512 GPUs; batch 64 /
                      280 / 512; micro batch 1) and Table 4 (iteration time with sequence
                      parallelism and selective recompute: 18.13 / 49.05 / 94.42 s)
ZeRO-3 GPT-175B       Narayanan et al. SC 2021, Table 2 / Fig. 10: ZeRO-3 without model
                      parallelism, 384 / 768 / 1,536 A100, micro batch 4 / 2 / 1, batch 1,536:
                      144 / 88 / 44 TFLOP/s per GPU (2021 DeepSpeed: collectives not overlapped,
                      full recompute, scores materialised, as the training-set Megatron points)
PaLM-540B int8 decode Pope et al., "Efficiently scaling transformer inference", 2022, Table 2 /
                      sec. 5: 64 TPU v4, int8 weights (bf16 activations: the chip here takes
                      int8 weights and 16-bit activations), batch 64, context 2,048, 64
                      generated tokens: 29 ms per token (split searched)
LLaMA-3 405B, Mixtral bench/pod_validation_recent.py: LLaMA-3 405B on 8,192 and 16,384 H100, Mixtral
8x22B, PaLM prefill   8x22B (MoE) on H100, PaLM-540B prefill (batch 1 int8, batch 512 bf16) and
and batch-512 decode  batch-512 bf16 decode on 64 TPU v4 (sources and setups there)
====================  ==========================================================================

Which points set which constants: none of the held-out points sets any. The presets' figures are
datasheet and microbenchmark figures (their comments); the A100 and TPU v4 presets' on-chip buffer
assumptions were made with the training set (bench/pod_validation_train.py) in view.

TFLOP/s per GPU is counted as the papers count it: ``96 B s l h^2 (1 + s / 6h + V / 16 l h)``
(Narayanan et al., with full recomputation) over the modelled step time.

Settings of the setups, not of the model: the ZeRO-3 points gather per weight tensor
(``zero_gather = "tensor"``, DeepSpeed ZeRO-3 of 2021; per layer they come out +11 / +51 / +124 %),
Korthikanti's and LLaMA's use sequence parallelism and selective recomputation (both papers state
them), the others full recomputation.

Usage: ``PYTHONPATH=. .venv/bin/python bench/pod_validation.py [--held-out]`` (a few seconds).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from accel_dse.pod_files import load_system  # noqa: E402
from accel_spec.pod_config import Split, SystemConfig  # noqa: E402
from perf_model.pod import SystemResult, evaluate_system  # noqa: E402
from workloads.llm_ops import LlmJob, LlmShape, llm_shape  # noqa: E402

SEQ = 2048


def megatron_tflops(shape: LlmShape, batch: int, seq: int, step_s: float, gpus: int) -> float:
    """Narayanan et al.'s count (full recomputation) over ``step_s``, TFLOP/s per GPU."""
    h, layers, vocab = shape.d, shape.layers, shape.vocab
    flops = 96 * batch * seq * layers * h * h * (1 + seq / (6 * h) + vocab / (16 * layers * h))
    return flops / step_s / gpus / 1e12


@dataclasses.dataclass(frozen=True)
class Point:
    """One published run: how to set it up and how to read the model's figure."""

    name: str
    metric: str
    published: float
    source: str
    system: Callable[[], SystemConfig]
    job: LlmJob
    splits: Callable[[SystemConfig, LlmJob], list[Split]]
    read: Callable[[SystemResult], float]
    setup: str = ""
    #: What the split search ranks by (``perf_model.pod.OBJECTIVES``; default step time or tokens/s).
    objective: str | None = None


def _a100(nodes: int) -> SystemConfig:
    a100, _ = load_system("a100-cluster")
    return dataclasses.replace(a100, pods=nodes)


def _mbs(job: LlmJob, dp: int, **kw: Any) -> Callable[[SystemConfig, LlmJob], list[Split]]:
    """The stated split, microbatch 1-8 (those dividing each replica's sequences)."""
    def make(system: SystemConfig, job: LlmJob) -> list[Split]:
        return [Split(dp=dp, microbatch=mb, **kw) for mb in (1, 2, 4, 8) if job.batch % (dp * mb) == 0]
    return make


def _tflops(job: LlmJob) -> Callable[[SystemResult], float]:
    return lambda r: megatron_tflops(job.shape, job.batch, job.seq, r.metrics["step_s"], r.system.chips)


OPT = LlmShape(name="opt-175b", layers=96, d=12288, heads=96, ffn=4 * 12288, vocab=50272, gated=False)
BLOOM = LlmShape(name="bloom-176b", layers=70, d=14336, heads=112, ffn=4 * 14336, vocab=250880, gated=False)
LLAMA65 = LlmShape(name="llama-65b", layers=80, d=8192, heads=64, ffn=22016, vocab=32000)
GOPHER = LlmShape(name="gopher-280b", layers=80, d=16384, heads=128, ffn=4 * 16384, vocab=32000, gated=False)
GPT175 = LlmShape(name="gpt-175b", layers=96, d=12288, heads=96, ffn=4 * 12288, vocab=51200, gated=False)
GPT530 = LlmShape(name="gpt-530b", layers=105, d=20480, heads=128, ffn=4 * 20480, vocab=51200, gated=False)
GPT1T = LlmShape(name="gpt-1t", layers=128, d=25600, heads=160, ffn=4 * 25600, vocab=51200, gated=False)

#: Options of the split the held-out points use where the model has them (filled in as the model grows).
FEATURES: dict[str, dict[str, Any]] = {
    # Korthikanti et al.'s "present work": sequence parallelism and selective recomputation
    "korthikanti": {"selective": True, "sequence_parallel": True},
    "bloom": {"recompute": 1.0}, "opt": {"recompute": 1.0},
    # LLaMA sec. 2.4: "model and sequence parallelism", saving the activations expensive to recompute
    "llama": {"selective": True, "sequence_parallel": True},
    "gopher": {"recompute": 1.0}}


def held_out() -> list[Point]:
    """The held-out points (module docstring)."""
    out: list[Point] = []
    job = LlmJob(shape=OPT, mode="train", batch=992, seq=SEQ, fused_attention=False)
    out.append(Point("OPT-175B, 992 A100, FSDP + TP 8", "TFLOP/s/GPU", 147.0, "Zhang et al. 2022, sec. 2.4",
                     lambda: _a100(124), job, _mbs(job, 124, tp=8, zero=3, **FEATURES["opt"]), _tflops(job)))
    job = LlmJob(shape=BLOOM, mode="train", batch=2048, seq=SEQ, fused_attention=False)
    out.append(Point("BLOOM-176B, 384 A100, TP 4 PP 12 DP 8", "TFLOP/s/GPU", 149.8, "BigScience 2022, sec. 3.4",
                     lambda: _a100(48), job,
                     lambda s, j: [Split(dp=8, tp=4, pp=12, zero=1, microbatch=2, **FEATURES["bloom"])],
                     _tflops(job)))
    job = LlmJob(shape=LLAMA65, mode="train", batch=2048, seq=SEQ, fused_attention=True)

    def llama_splits(system: SystemConfig, job: LlmJob) -> list[Split]:
        return [Split(dp=2048 // (tp * pp), tp=tp, pp=pp, zero=1, microbatch=mb, **FEATURES["llama"])
                for tp in (2, 4, 8) for pp in (1, 2, 4, 8) for mb in (1, 2, 4)
                if 2048 % (2048 // (tp * pp) * mb) == 0]
    out.append(Point("LLaMA-65B, 2048 A100", "tokens/s/GPU", 380.0, "Touvron et al. 2023, sec. 2.4",
                     lambda: _a100(256), job, llama_splits, lambda r: r.metrics["tokens_per_s_per_chip"]))
    job = LlmJob(shape=GOPHER, mode="train", batch=1536, seq=SEQ, fused_attention=False)

    def v3_pods() -> SystemConfig:
        v3, _ = load_system("tpu-v3-pod")
        return dataclasses.replace(v3, pods=4)
    out.append(Point("Gopher-280B, 4096 TPU v3", "MFU %", 32.5, "Rae et al. 2021; PaLM Table 3", v3_pods, job,
                     lambda s, j: [Split(dp=128, tp=8, pp=4, zero=z, microbatch=mb, **FEATURES["gopher"])
                                   for mb in (1, 2, 4) for z in (1, 2)],
                     lambda r: 100 * r.metrics["mfu"]))
    for shape, pp, gpus, published in ((GPT175, 8, 64, 18.13), (GPT530, 35, 280, 49.05), (GPT1T, 64, 512, 94.42)):
        job = LlmJob(shape=shape, mode="train", batch=gpus, seq=SEQ, fused_attention=False)
        out.append(Point(f"Korthikanti {shape.name.upper()}, {gpus} A100, TP 8 PP {pp}", "s/iteration", published,
                         "Korthikanti et al. 2022, Tables 3-4", (lambda g=gpus: _a100(g // 8)), job,
                         (lambda s, j, pp=pp: [Split(dp=1, tp=8, pp=pp, microbatch=1, overlap=False,
                                                     **FEATURES["korthikanti"])]),
                         lambda r: r.metrics["step_s"]))
    job = LlmJob(shape=GPT175, mode="train", batch=1536, seq=SEQ, fused_attention=False)
    for gpus, mb, published in ((384, 4, 144.0), (768, 2, 88.0), (1536, 1, 44.0)):
        out.append(Point(f"ZeRO-3 GPT-175B, {gpus} A100", "TFLOP/s/GPU", published,
                         "Narayanan et al. 2021, Table 2", (lambda g=gpus: _a100(g // 8)), job,
                         (lambda s, j, g=gpus, mb=mb: [Split(dp=g, zero=3, microbatch=mb, recompute=1.0,
                                                             zero_gather="tensor", overlap=False)]),
                         _tflops(job)))
    job = LlmJob(shape=llm_shape("palm540b"), mode="serve", batch=64, seq=SEQ, gen=64, fused_attention=True)

    def v4_int8() -> SystemConfig:
        v4, _ = load_system("tpu-v4-pod")
        chip = dataclasses.replace(v4.chip, weight_format="int8", act_format="int16")
        return dataclasses.replace(v4, chip=chip, dims=(4, 4, 4))

    def palm_splits(system: SystemConfig, job: LlmJob) -> list[Split]:
        return [Split(dp=1, tp=tp, pp=64 // tp, microbatch=mb) for tp in (1, 2, 4, 8, 16, 32, 64)
                for mb in (1, 2, 4, 8, 16, 32, 64)]
    out.append(Point("PaLM-540B int8 decode, 64 TPU v4", "ms/token", 29.0, "Pope et al. 2022, Table 2", v4_int8, job,
                     palm_splits, lambda r: 1e3 * r.metrics["tpot_s"]))
    import pod_validation_recent  # H100, MoE and prefill points (that module's docstring)
    return out + pod_validation_recent.points()


def run(point: Point) -> tuple[float | None, SystemResult]:
    """The model's figure for ``point`` (``None`` when no split runs) and the result."""
    system = point.system()
    result = evaluate_system(system, point.job, splits=point.splits(system, point.job), objective=point.objective)
    return (point.read(result) if result.ok else None), result


def _row(name: str, metric: str, published: float, predicted: float | None, result: SystemResult,
         source: str) -> float | None:
    if predicted is None:
        print(f"| {name} | {metric} | {published:g} | refused | - | {result.reason[:90]} | {source} |")
        return None
    error = (predicted - published) / published
    bd, step = result.breakdown, result.metrics["step_s"]
    shares = " / ".join(f"{100 * bd[k] / step:.0f}" for k in ("compute_s", "exposed_comm_s", "bubble_s"))
    print(f"| {name} | {metric} | {published:g} | {predicted:.4g} | {100 * error:+.1f} % | "
          f"{result.split.label()}; compute/comm/bubble % {shares} | {source} |")
    return error


#: The groups the held-out set is reported in (a point's group: the first whose test matches).
GROUPS: tuple[tuple[str, Callable[[Point], bool]], ...] = (
    ("serving (decode and prefill)", lambda p: p.job.mode == "serve"),
    ("MoE training", lambda p: p.job.shape.moe),
    ("FSDP / ZeRO-3 training", lambda p: "ZeRO-3" in p.name or "FSDP" in p.name),
    ("TPU training", lambda p: "TPU" in p.name),
    ("GPU training", lambda p: True),
)


def _group(point: Point) -> str:
    return next(name for name, test in GROUPS if test(point))


def _summary(group: str, errors: list[float | None]) -> None:
    ran = [abs(e) for e in errors if e is not None]
    refused = len(errors) - len(ran)
    if ran:
        print(f"\n{group}: mean absolute error {100 * sum(ran) / len(ran):.1f} % over {len(ran)} points "
              f"(max {100 * max(ran):.1f} %), {refused} refused\n")


def main(argv: list[str]) -> None:
    header = ("| point | metric | published | predicted | error | split; time shares | source |\n"
              "|---|---|---:|---:|---:|---|---|")
    if "--held-out" not in argv:
        import pod_validation_train  # the training set
        print("## Training set (bench/pod_validation_train.py)\n")
        print(header)
        errors: list[float | None] = []
        for row in pod_validation_train.rows():
            errors.append(_row(str(row["point"]), str(row["metric"]), float(row["measured"]),
                               float(row["predicted"]), row["result"], "bench/pod_validation_train.py"))
        _summary("training set", errors)
    print("## Held-out set (not tuned on)\n")
    print(header)
    errors = []
    by_group: dict[str, list[float | None]] = {}
    for point in held_out():
        predicted, result = run(point)
        errors.append(_row(point.name, point.metric, point.published, predicted, result, point.source))
        by_group.setdefault(_group(point), []).append(errors[-1])
    _summary("held-out set", errors)
    for name, _ in GROUPS:
        if name in by_group:
            _summary(f"held-out, {name}", by_group[name])


if __name__ == "__main__":
    main(sys.argv[1:])
