"""Search efficiency of the sweep's samplers against the true optimum (prints figures).

On a fixed space of 77,760 designs (ResNet-18, minimise EDP under area <= 4 mm^2 and power
<= 2 W), the ``grid`` sampler finds the true optimum with the vectorised model. Then each
loop sampler runs from several seeds and the script prints, as the median over the seeds:

* the number of trials until the best feasible design is within 1 % of the optimum (and, as a
  coarser figure, within 5 %);
* the best found after 100, 200, 500 and 1000 trials, as a ratio to the optimum (1.000 = found).

For ``random`` the exact expectation is also printed from the grid: uniform sampling hits
the within-1 % set (a fraction ``p`` of the space) after a geometric number of trials, median
``ceil(log(0.5) / log(1 - p))`` (same for 5 %). Targets (issue 7): the best sampler within 1 % in <= 200
trials and >= 5x fewer trials than random.

Last, the throughput of a model-only sweep (random sampler, so the figure is the sweep
machinery plus the model, not a sampler's own cost), trials/s per worker, on in-memory,
SQLite and journal storage (target >= 50).

Usage: ``.venv/bin/python bench/search_efficiency.py [--seeds 5] [--trials 1000]``
(about 15 minutes on 2 cores, most of it TPE; ``--quick`` for a 3-seed, 200-trial smoke run).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import optuna  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

import workloads  # noqa: E402
from accel_dse.search import ModelEvaluator, SweepConfig, grid_search, parse_space, run_sweep  # noqa: E402

SPACE = {
    "name": "bench-78k",
    "objectives": ["edp"],
    "constraints": ["area_mm2 <= 4", "power_w <= 2"],
    "workloads": ["resnet18"],
    "params": {
        "rows": {"low": 4, "high": 128, "scale": "pow2"},
        "cols": {"low": 4, "high": 128, "scale": "pow2"},
        "dataflow": ["ws", "os", "is"],
        "ifmap_sram_kib": {"low": 32, "high": 1024, "scale": "pow2"},
        "weight_sram_kib": {"low": 32, "high": 1024, "scale": "pow2"},
        "ofmap_sram_kib": 512,
        "dram_bytes_per_cycle": [4.0, 8.0, 16.0, 32.0],
        "clock_mhz": {"low": 400.0, "high": 1200.0, "step": 200.0},
        "double_buffered": True,
        "tech_nm": 28,
    },
}
SAMPLERS = ["tpe", "nsga2", "cmaes", "rl", "random"]


def best_curve(study: optuna.Study, n: int) -> np.ndarray:
    """Best feasible objective after each of the first ``n`` trials (inf before the first)."""
    best = math.inf
    curve = np.full(n, math.inf)
    for i, t in enumerate(sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)[:n]):
        ok = t.state == TrialState.COMPLETE and all(v <= 0 for v in t.user_attrs.get("constraint_values", []))
        if ok and t.value < best:
            best = t.value
        curve[i] = best
    return curve


def trials_to(curve: np.ndarray, target: float) -> int | None:
    hit = np.flatnonzero(curve <= target)
    return int(hit[0]) + 1 if hit.size else None


def run_one(space, evaluator, sampler: str, seed: int, trials: int) -> np.ndarray:
    config = SweepConfig(space=space, evaluator=evaluator, storage="memory:", study_name=f"{sampler}-{seed}",
                         sampler=sampler, n_trials=trials, seed=seed)
    return best_curve(run_sweep(config).study, trials)


def fmt_ratio(values: list[float]) -> str:
    m = statistics.median(values)
    return "none" if math.isinf(m) else f"{m:.3f}"


def throughput(space, evaluator, storage: str, jobs: int, trials: int) -> float:
    """Trials/s per worker, from the first trial's start to the last one's end (worker start-up excluded)."""
    config = SweepConfig(space=space, evaluator=evaluator, storage=storage, study_name="speed", sampler="random",
                         n_trials=trials, jobs=jobs, seed=0)
    done = run_sweep(config).study.get_trials()
    first = min(t.datetime_start for t in done)
    last = max(t.datetime_complete for t in done)
    return len(done) / (last - first).total_seconds() / jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="3 seeds, 200 trials")
    args = parser.parse_args()
    seeds, trials = (3, 200) if args.quick else (args.seeds, args.trials)
    checkpoints = [c for c in (100, 200, 500, 1000) if c <= trials]

    space = parse_space(SPACE, source="bench space")
    evaluator = ModelEvaluator([("resnet18", 1.0, workloads.resolve("resnet18"))])
    print(f"space {space.name}: {space.grid_size():,} designs, minimise edp, "
          f"{', '.join(str(c) for c in space.constraints)}; workload resnet18")

    start = time.perf_counter()
    grid = grid_search(space, evaluator, keep=1)
    grid_s = time.perf_counter() - start
    optimum = float(grid.values[0, 0])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"grid: {grid.size:,} designs in {grid_s:.1f} s ({grid.size / grid_s:,.0f} designs/s), "
          f"{grid.n_feasible:,} feasible, optimum edp = {optimum:.6g} J*s")
    cols = space.grid_columns(0, grid.size)
    batch = evaluator.evaluate_columns(cols)
    ok = batch.feasible.copy()
    for c in space.constraints:
        ok &= c.violation(batch.metrics[c.metric]) <= 0
    random_medians = {}
    for tol in (1, 5):
        within = int((ok & (batch.metrics["edp"] <= (1 + tol / 100) * optimum)).sum())
        p = within / grid.size
        random_medians[tol] = math.ceil(math.log(0.5) / math.log(1 - p))
        print(f"designs within {tol}% of the optimum: {within} of {grid.size:,} (p = {p:.2e}); uniform random "
              f"sampling needs {1 / p:,.0f} trials on average, median {random_medians[tol]:,}")
    print()

    header = f"{'sampler':8} {'to 1% (median)':>14}  {'per seed':26}  {'to 5%':>6}" + "".join(
        f"  {'best/opt @' + str(c):>13}" for c in checkpoints) + f"  {'s/run':>6}"
    print(header)
    print("-" * len(header))
    medians: dict[str, float] = {}
    medians5: dict[str, float] = {}
    for sampler in SAMPLERS:
        curves, seconds = [], []
        for seed in range(seeds):
            t0 = time.perf_counter()
            curves.append(run_one(space, evaluator, sampler, seed, trials))
            seconds.append(time.perf_counter() - t0)
        hits = [trials_to(c, 1.01 * optimum) for c in curves]
        as_num = [h if h is not None else math.inf for h in hits]
        med = statistics.median(as_num)
        medians[sampler] = med
        shown = "none" if math.isinf(med) else f"{med:g}"
        per_seed = ",".join("-" if h is None else str(h) for h in hits)
        five = statistics.median([h if h is not None else math.inf for h in
                                  (trials_to(c, 1.05 * optimum) for c in curves)])
        medians5[sampler] = five
        five_shown = "none" if math.isinf(five) else f"{five:g}"
        ratios = "".join(f"  {fmt_ratio([c[cp - 1] / optimum for c in curves]):>13}" for cp in checkpoints)
        print(f"{sampler:8} {shown:>14}  {per_seed:26}  {five_shown:>6}{ratios}  {statistics.median(seconds):6.1f}",
              flush=True)
    print(f"(- = not within 1% after {trials} trials; a median of 'none' means most seeds did not get there)")
    print()
    for tol, table in ((1, medians), (5, medians5)):
        loop = {s: m for s, m in table.items() if s != "random"}
        best_sampler = min(loop, key=lambda s: loop[s])
        best = loop[best_sampler]
        exact = random_medians[tol]
        if math.isinf(best):
            print(f"within {tol}%: no loop sampler got there in {trials} trials (median of {seeds} seeds); random "
                  f"needs a median of {exact:,} (exact)")
            continue
        print(f"within {tol}%: best sampler {best_sampler}, median {best:g} trials"
              + (f" (target <= 200: {'met' if best <= 200 else 'NOT met'})" if tol == 1 else "")
              + f"; random needs a median of {exact:,} (exact): {exact / best:.1f}x"
              + (f" (target >= 5x: {'met' if exact / best >= 5 else 'NOT met'})" if tol == 1 else ""))
    print()

    with tempfile.TemporaryDirectory() as tmp:
        rates = [
            ("memory, 1 worker", throughput(space, evaluator, "memory:", 1, 400)),
            ("sqlite, 1 worker", throughput(space, evaluator, f"sqlite:///{tmp}/s.db", 1, 400)),
            ("journal, 1 worker", throughput(space, evaluator, f"journal:{tmp}/j1.log", 1, 400)),
            ("journal, 2 workers", throughput(space, evaluator, f"journal:{tmp}/j2.log", 2, 600)),
        ]
    load = os.getloadavg()[0]
    print(f"model-only sweep (random sampler, resnet18), trials/s per worker (target >= 50; "
          f"{os.cpu_count()} cores, load average {load:.1f}):")
    for name, rate in rates:
        print(f"  {name:20} {rate:7.1f}")


if __name__ == "__main__":
    main()
