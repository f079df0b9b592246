"""Small systems and jobs for the pod tests (fast: tiny models, few chips)."""

from __future__ import annotations

from accel_spec.config import ArrayConfig
from accel_spec.pod_config import SystemConfig
from workloads.llm_ops import LlmJob, LlmShape

CHIP = ArrayConfig(rows=16, cols=16, input_bits=16, acc_bits=64, ifmap_sram_kib=256, weight_sram_kib=256,
                   ofmap_sram_kib=512, dram_bytes_per_cycle=64.0, clock_mhz=1000.0, tech_nm=7, dram="hbm2e")

DENSE = LlmShape(name="tiny", layers=4, d=256, heads=8, kv_heads=4, ffn=512, vocab=1024)
MOE = LlmShape(name="tiny_moe", layers=4, d=256, heads=8, kv_heads=4, vocab=1024, experts=8, top_k=2, expert_ffn=128)


def system(topology: str = "torus2d", dims: tuple[int, ...] = (2, 2), **kw: object) -> SystemConfig:
    base: dict[str, object] = {"chip": CHIP, "topology": topology, "dims": dims, "link_gb_per_s": 10.0,
                               "link_latency_us": 1.0, "hbm_gib": 4.0}
    base.update(kw)
    return SystemConfig(**base)  # type: ignore[arg-type]


def train(shape: LlmShape = DENSE, batch: int = 8, seq: int = 64) -> LlmJob:
    return LlmJob(shape=shape, mode="train", batch=batch, seq=seq)


def serve(shape: LlmShape = MOE, batch: int = 8, seq: int = 64, gen: int = 8) -> LlmJob:
    return LlmJob(shape=shape, mode="serve", batch=batch, seq=seq, gen=gen)
