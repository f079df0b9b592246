"""The system model against published multi-chip training results nobody here tuned on.

Points (the measured figure, the system preset, the split the paper states; the model only
chooses the microbatch size, from 1, 2, 4, 8 sequences, for the shortest step, as the authors
tuned theirs):

* Megatron-LM, Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
  Using Megatron-LM", SC 2021, Table 1: GPT models of 1.7 B to 1 T parameters on 32 to 3,072
  A100s (DGX A100 nodes of 8), sequence 2,048, vocabulary 51,200, the stated tensor and pipeline
  sizes and batch, full activation recomputation, scores materialised (2021, no fused
  attention), data-parallel all-reduce not overlapped. Measured: teraFLOP/s per GPU counted with
  the paper's formula ``96 B s l h^2 (1 + s / 6h + V / 16 l h)``; predicted: the same count over
  the modelled step time. Preset ``a100-cluster`` with ``pods`` = nodes.
* Megatron-Turing NLG 530B (Smith et al. 2022) on 2,240 A100s (280 nodes), tensor 8, pipeline
  35, data 8, batch 1,920, sequence 2,048: 30.2 % MFU as PaLM (Chowdhery et al. 2022, Table 3)
  lists it. Predicted: MFU (``6 N + 12 L H Q T`` per token).
* PaLM 540B on 6,144 TPU v4 in two pods of 3,072 (Chowdhery et al. 2022, sec. 4 and Table 3):
  12-way model (tensor) parallel and 256-way fully sharded data parallel in a pod, 2-way data
  parallel over the DCN, batch 2,048 of 2,048 tokens; 46.2 % MFU (57.8 % HFU: the HFU/MFU ratio
  1.251 is recomputation of 0.75 of the forward pass, which the model takes as given). Preset
  ``tpu-v4-pod`` with dims 12 x 16 x 16 per pod (3,072 chips; the slice shape is not published)
  and 2 pods.

Usage: ``.venv/bin/python bench/pod_validation_train.py`` (about 10 s); docs/system.md holds its table.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from accel_dse.pod_files import load_system  # noqa: E402
from accel_spec.pod_config import Split  # noqa: E402
from perf_model.pod import evaluate_system  # noqa: E402
from workloads.llm_ops import LlmJob, LlmShape, llm_shape  # noqa: E402

#: Narayanan et al. SC21 Table 1: params (B), heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s per GPU.
MEGATRON = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137), (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142), (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138), (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148), (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163), (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
SEQ, VOCAB = 2048, 51200


def _best(system, job, dp, tp, pp, **kw):
    splits = [Split(dp=dp, tp=tp, pp=pp, microbatch=mb, **kw) for mb in (1, 2, 4, 8) if job.batch % (dp * mb) == 0]
    return evaluate_system(system, job, splits=splits)


def rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    a100, _ = load_system("a100-cluster")
    for params, heads, h, layers, tp, pp, gpus, batch, measured in MEGATRON:
        shape = LlmShape(name=f"gpt-{params}b", layers=layers, d=h, heads=heads, ffn=4 * h, vocab=VOCAB, gated=False)
        job = LlmJob(shape=shape, mode="train", batch=batch, seq=SEQ, fused_attention=False)
        result = _best(dataclasses.replace(a100, pods=gpus // 8), job, gpus // (tp * pp), tp, pp,
                       recompute=1.0, overlap=False)
        flops = 96 * batch * SEQ * layers * h * h * (1 + SEQ / (6 * h) + VOCAB / (16 * layers * h))
        predicted = flops / result.metrics["step_s"] / gpus / 1e12
        out.append({"point": f"Megatron GPT {params} B, {gpus} A100", "metric": "TFLOP/s/GPU",
                    "measured": measured, "predicted": predicted, "result": result})
    shape = LlmShape(name="mt-nlg-530b", layers=105, d=20480, heads=128, ffn=4 * 20480, vocab=VOCAB, gated=False)
    job = LlmJob(shape=shape, mode="train", batch=1920, seq=SEQ, fused_attention=False)
    result = _best(dataclasses.replace(a100, pods=280), job, 8, 8, 35, recompute=1.0, overlap=False)
    out.append({"point": "MT-NLG 530 B, 2,240 A100", "metric": "MFU %", "measured": 30.2,
                "predicted": 100 * result.metrics["mfu"], "result": result})
    v4, _ = load_system("tpu-v4-pod")
    system = dataclasses.replace(v4, dims=(12, 16, 16), pods=2)
    job = LlmJob(shape=llm_shape("palm540b"), mode="train", batch=2048, seq=SEQ, fused_attention=False)
    result = _best(system, job, 512, 12, 1, zero=3, recompute=0.75)
    out.append({"point": "PaLM 540 B, 6,144 TPU v4", "metric": "MFU %", "measured": 46.2,
                "predicted": 100 * result.metrics["mfu"], "result": result})
    return out


def main() -> None:
    table = rows()
    print("| point | metric | measured | predicted | error | split (microbatch chosen) "
          "| compute / exposed comm / bubble |")
    print("|---|---|---:|---:|---:|---|---|")
    errors = []
    for row in table:
        result = row["result"]
        measured, predicted = float(row["measured"]), float(row["predicted"])
        error = (predicted - measured) / measured
        errors.append(abs(error))
        bd, step = result.breakdown, result.metrics["step_s"]
        shares = " / ".join(f"{100 * bd[k] / step:.0f} %" for k in ("compute_s", "exposed_comm_s", "bubble_s"))
        print(f"| {row['point']} | {row['metric']} | {measured:g} | {predicted:.1f} | {100 * error:+.1f} % | "
              f"{result.split.label()} | {shares} |")
    print(f"\nmean absolute error over {len(errors)} points: {100 * sum(errors) / len(errors):.1f} % "
          f"(max {100 * max(errors):.1f} %)")


if __name__ == "__main__":
    main()
