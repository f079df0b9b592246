"""Speed of the system model: split evaluations per second, and chip x system designs per second.

1. One system and job, every candidate split (``perf_model.pod.candidate_splits``) evaluated,
   the op times shared (each distinct op costed once by the single-chip model): splits/s.
2. A small co-design grid: core array shape (same peak) x HBM GB/s x link bandwidth x HBM capacity,
   each point a full split search (the first point of a chip pays its ops' single-chip
   evaluation; link and capacity variants reuse them): designs/s and splits/s.

3. ``accel-dse sweep`` (random sampler, SQLite, 100 trials) on the shipped pod space
   ``pod-llama70b`` beside the single-chip space ``edge-int8``: trials/s of each (wall time of the
   sweep's own loop as it prints it, the workload tracing before it excluded).

Usage: ``.venv/bin/python bench/pod_sweep.py`` (``--no-sweep`` skips part 3)
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from accel_dse.pod_files import load_system  # noqa: E402
from perf_model.pod import OpCosts, candidate_splits, evaluate_split  # noqa: E402
from workloads.llm_ops import LlmJob, llm_shape  # noqa: E402


def search(system, job, costs):
    best = None
    splits = candidate_splits(system, job)
    for split in splits:
        r = evaluate_split(system, job, split, costs)
        if r.ok and (best is None or r.metrics["step_s"] < best.metrics["step_s"]):
            best = r
    return best, len(splits)


def main() -> None:
    v4, _ = load_system("tpu-v4-pod")
    system = dataclasses.replace(v4, dims=(8, 8, 8))
    for job in (LlmJob(shape=llm_shape("llama70b"), mode="train", batch=1024, seq=4096),
                LlmJob(shape=llm_shape("qwen3_moe_235b"), mode="serve", batch=512, seq=2048, gen=256)):
        costs = OpCosts(system.chip)
        t0 = time.perf_counter()
        best, n = search(system, job, costs)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        search(system, job, costs)
        warm = time.perf_counter() - t0
        print(f"{job.name} on {system.chips} chips: {n} splits, cold {cold:.2f} s ({n / cold:,.0f} splits/s, "
              f"ops costed once), warm {warm:.2f} s ({n / warm:,.0f} splits/s); best {best.split.label()}, "
              f"step {best.metrics['step_s']:.3f} s, MFU {best.metrics['mfu']:.3f}")
    job = LlmJob(shape=llm_shape("llama70b"), mode="train", batch=512, seq=2048)
    grid = list(itertools.product((64, 128, 256), (800.0, 1200.0), (25.0, 50.0, 100.0), (16.0, 32.0)))
    t0 = time.perf_counter()
    splits = 0
    costs_by_chip: dict[object, OpCosts] = {}
    for side, hbm_gbs, link, hbm in grid:
        cores = 8 * 128 * 128 // (side * side)  # the same peak: 8 cores of 128 x 128, 32 of 64 x 64, 2 of 256 x 256
        per_core = hbm_gbs * 1e9 / (system.chip.clock_mhz * 1e6) / cores
        chip = dataclasses.replace(system.chip, rows=side, cols=side, dram_bytes_per_cycle=per_core)
        sysd = dataclasses.replace(system, chip=chip, cores=cores, link_gb_per_s=link, hbm_gib=hbm)
        costs = costs_by_chip.setdefault(chip, OpCosts(chip))
        _, n = search(sysd, job, costs)
        splits += n
    dt = time.perf_counter() - t0
    print(f"co-design grid: {len(grid)} chip x system designs with a full split search each in {dt:.1f} s: "
          f"{len(grid) / dt:.2f} designs/s, {splits / dt:,.0f} splits/s ({len(costs_by_chip)} distinct chips)")


def sweeps(trials: int = 100) -> None:
    for space in ("edge-int8", "pod-llama70b"):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "accel_dse", "sweep", "--space", space, "--trials", str(trials), "--sampler",
                   "random", "--seed", "0", "--storage", f"sqlite:///{tmp}/s.db", "--out-dir", tmp]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
            total = time.perf_counter() - t0
            rates = re.findall(r"([0-9.]+) trials/s", proc.stderr + proc.stdout)
            print(f"sweep {space}: {trials} random trials, {total:.1f} s with start-up; the loop's own rate "
                  f"{rates[-1] if rates else '?'} trials/s (exit {proc.returncode})")


if __name__ == "__main__":
    main()
    if "--no-sweep" not in sys.argv:
        sweeps()
