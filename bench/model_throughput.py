"""Throughput of the analytic model: design-op evaluations per second on a design grid.

Evaluates a full-factorial grid of designs (at least 10,000) on every op of ResNet-18 and of a
BERT-base encoder layer with ``perf_model.evaluate_designs`` and prints design-op evaluations
per second, in one process and split over worker processes (one per core by default), with
the peak memory (max RSS) of the parent and of the workers. Nothing is asserted: this prints
figures. The machine's load average is printed too, since other work on the cores shows.

``--workloads`` picks the workloads (``--cnn``: ResNet-18 and MobileNetV2, ``--transformer``: BERT-base
and LLaMA decode), each then timed on its own too, per CPU second (``time.process_time``): the
first pass (caches cold: what a sweep's new designs cost) and the best of ``--repeat`` passes.
``--designs N`` draws N designs of the grid (seeded) instead of all of it. ``--repo PATH`` imports
the model from another checkout (this grid and timing, that model: two versions compared in one
sitting, one after the other).

Run: ``.venv/bin/python bench/model_throughput.py [--workers N] [--repeat R] [--cnn | --transformer]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import multiprocessing as mp
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

_REPO = next((a.split("=", 1)[1] if "=" in a else sys.argv[i + 2] for i, a in enumerate(sys.argv[1:])
              if a.startswith("--repo")), str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(_REPO).resolve()))

import perf_model  # noqa: E402
import workloads  # noqa: E402

CNN, TRANSFORMER = ("resnet18", "mobilenet_v2"), ("bert_base", "llama_decode")

#: The grid: every combination of these values (6*6*3*2*3*3*2*2*2 = 15,552 designs).
GRID = {
    "rows": [8, 16, 32, 64, 128, 256],
    "cols": [8, 16, 32, 64, 128, 256],
    "dataflow": [0, 1, 2],
    "input_bits": [8, 16],
    "ifmap_sram_kib": [32, 128, 512],
    "weight_sram_kib": [32, 128, 512],
    "ofmap_sram_kib": [64, 256],
    "dram_bytes_per_cycle": [8.0, 32.0],
    "double_buffered": [False, True],
}


def grid_columns() -> dict[str, np.ndarray]:
    """Columns of the full-factorial grid (tech 28 nm, 1 GHz, 32-bit accumulators, no DRAM part)."""
    values = list(itertools.product(*GRID.values()))
    columns = {name: np.array([v[i] for v in values]) for i, name in enumerate(GRID)}
    columns["acc_bits"] = np.where(columns["input_bits"] == 16, 48, 32)
    columns["tech_nm"] = np.full(len(values), 28)
    columns["clock_mhz"] = np.full(len(values), 1000.0)
    if "dram" in {f.name for f in dataclasses.fields(perf_model.DesignArrays)}:
        # the memory the grid's per-cycle figures mean, as on every model version measured: no part's
        # pacing (a design naming none gets lpddr5-x32 since #52, which paces the 32 B/cycle half)
        columns["dram"] = np.full(len(values), "none")
    return columns


def _evaluate(args: tuple[dict[str, np.ndarray], list]) -> tuple[float, float, int]:
    """Evaluate a slice of designs; returns (wall s, cpu s, feasible count) (worker side)."""
    columns, ops = args
    designs = perf_model.DesignArrays.from_columns(**columns)
    start, cpu = time.perf_counter(), time.process_time()
    table = perf_model.evaluate_designs(designs, ops)
    return time.perf_counter() - start, time.process_time() - cpu, int(table.feasible.sum())


def _per_workload(columns: dict[str, np.ndarray], names: list[str], repeat: int) -> None:
    """Each workload alone, one process: design-op evaluations per CPU second, first pass and best."""
    designs = perf_model.DesignArrays.from_columns(**columns)
    for name in names:
        wl = workloads.resolve(name)
        passes = []
        for _ in range(repeat):
            cpu = time.process_time()
            perf_model.evaluate_designs(designs, wl)
            passes.append(time.process_time() - cpu)
        pairs = len(designs) * len(wl.ops)
        print(f"  {name:13s}: {len(wl.ops):3d} ops, first pass {passes[0]:8.2f} s CPU -> {pairs / passes[0]:11,.0f} "
              f"evals per CPU second; best of {repeat} {min(passes):8.2f} s -> {pairs / min(passes):11,.0f}",
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions (best is reported)")
    parser.add_argument("--workloads", default="resnet18,bert_base", help="comma-separated workload specs")
    parser.add_argument("--cnn", action="store_true", help=f"the CNNs only: {', '.join(CNN)}")
    parser.add_argument("--transformer", action="store_true", help=f"the transformers only: {', '.join(TRANSFORMER)}")
    parser.add_argument("--designs", type=int, default=0, help="designs drawn from the grid (0: all of it)")
    parser.add_argument("--repo", default=_REPO, help="checkout whose model is measured")
    args = parser.parse_args()
    names = list(CNN if args.cnn else TRANSFORMER if args.transformer else args.workloads.split(","))
    columns = grid_columns()
    if args.designs:
        pick = np.random.default_rng(27).choice(len(columns["rows"]), size=args.designs, replace=False)
        columns = {k: v[np.sort(pick)] for k, v in columns.items()}
    print(f"model from {Path(perf_model.__file__).resolve().parent.parent}")
    if args.cnn or args.transformer or args.workloads != "resnet18,bert_base":
        print(f"{len(columns['rows']):,} designs; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        gemm = workloads.resolve("gemm")  # warm-up (imports) on no conv: the first pass below is cold
        _evaluate(({k: v[:50] for k, v in columns.items()}, list(zip(gemm.ops, gemm.counts, strict=True))))
        _per_workload(columns, names, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return 0
    return _both(args, columns)


def _both(args: argparse.Namespace, columns: dict[str, np.ndarray]) -> int:
    """ResNet-18 and BERT-base as one workload list (the original figure), one process and workers."""
    resnet = workloads.resolve("resnet18")
    bert = workloads.resolve("bert_base")
    ops = [(op, c) for w in (resnet, bert) for op, c in zip(w.ops, w.counts, strict=True)]
    n_designs = len(columns["rows"])
    pairs = n_designs * len(ops)
    print(f"grid: {n_designs:,} designs x {len(ops)} ops ({len(resnet.ops)} ResNet-18 + {len(bert.ops)} "
          f"BERT-base) = {pairs:,} design-op evaluations")
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")

    _evaluate(({k: v[:50] for k, v in columns.items()}, ops))  # warm-up (imports, contract probe)
    best_wall = best_cpu = float("inf")
    feasible = 0
    for _ in range(args.repeat):
        wall, cpu, feasible = _evaluate((columns, ops))
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    rss_parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"1 process : {best_wall:.3f} s wall, {best_cpu:.3f} s CPU -> {pairs / best_wall:,.0f} evals/s wall, "
          f"{pairs / best_cpu:,.0f} evals/s per CPU second; feasible designs {feasible:,}")

    if args.workers > 1:
        bounds = np.linspace(0, n_designs, args.workers + 1).astype(int)
        parts = [({k: v[lo:hi] for k, v in columns.items()}, ops) for lo, hi in itertools.pairwise(bounds)]
        context = mp.get_context("fork")
        with ProcessPoolExecutor(max_workers=args.workers, mp_context=context) as pool:
            list(pool.map(_evaluate, [({k: v[:50] for k, v in p[0].items()}, ops) for p in parts]))  # warm-up
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                results = list(pool.map(_evaluate, parts))
                best = min(best, time.perf_counter() - start)
        rss_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        slowest = max(r[0] for r in results)
        print(f"{args.workers} processes: {best:.3f} s wall (slowest worker {slowest:.3f} s) -> "
              f"{pairs / best:,.0f} evals/s")
        print(f"peak memory: parent {rss_parent:,.0f} MiB, largest worker {rss_children:,.0f} MiB (max RSS)")
    else:
        print(f"peak memory: {rss_parent:,.0f} MiB (max RSS)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
