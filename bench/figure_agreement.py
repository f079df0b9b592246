"""Agreement of the figure the sweep records with the program walk, on random designs.

For random designs with the vector unit (every dataflow, buffers, bus and clock drawn at random)
on ResNet-18, MobileNetV2, a BERT-base encoder layer and a LLaMA decode step, prints per workload:

* the recorded figure (``perf_model.evaluate_designs``' ``total_cycles``, what the sweep records)
  against the program walk (``perf_model.compiler.network_figures`` where the design runs the
  workload as one program, else the op-by-op programs): max and median relative deviation, and the
  Spearman rank correlation of the top 20 designs under both;
* the same for the per-op sum (each op on its own plan, the vector work after them: the figure the
  sweep recorded before the one figure), which is also how far the one program lies from its parts;
* the seconds ``evaluate_designs`` takes per design, with the walk, and how many designs run as one
  program.

Nothing is asserted: this prints figures. Run:
``PYTHONPATH=. .venv/bin/python bench/figure_agreement.py [--designs N] [--seed S] [--workloads a,b]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from perf_model.arrays.ops import op_arrays  # noqa: E402
from perf_model.compiler.network_figures import network_figures  # noqa: E402
from perf_model.compiler.scorers import COMPILER_SCORERS
from perf_model.compiler.vector_walk import COMPILER_WALKS  # noqa: E402
from perf_model.evaluator.design_ops import evaluate_block  # noqa: E402
from perf_model.evaluator.vector_work import vector_columns, workload_vector_ops  # noqa: E402
from perf_model.figures.design_table import totals  # noqa: E402
from perf_model.physical.energy import DEFAULT_ENERGY  # noqa: E402
from perf_model.physical.pe_area import area_coefficients  # noqa: E402

WORKLOADS = ("resnet18", "mobilenet_v2", "bert_base", "llama_decode")
TOP = 20


def random_columns(n: int, seed: int) -> dict[str, np.ndarray]:
    """``n`` random int8 designs with the vector unit (the edge-int8 space's ranges, all three dataflows)."""
    rng = np.random.default_rng(seed)
    pow2 = lambda lo, hi: 2 ** rng.integers(lo, hi + 1, n)  # noqa: E731
    return {"rows": pow2(3, 7), "cols": pow2(3, 7), "dataflow": rng.integers(0, 3, n), "input_bits": np.full(n, 8),
            "acc_bits": np.full(n, 32), "ifmap_sram_kib": pow2(5, 11), "weight_sram_kib": pow2(5, 11),
            "ofmap_sram_kib": pow2(5, 11), "dram_bytes_per_cycle": rng.choice([4.0, 8.0, 16.0, 32.0], n),
            "clock_mhz": rng.choice(np.arange(400.0, 1201.0, 100.0), n), "double_buffered": rng.random(n) < 0.5,
            "tech_nm": np.full(n, 28), "vector_unit": np.ones(n, dtype=bool)}


def per_op_sum(designs: perf_model.DesignArrays, wl: workloads.Workload) -> np.ndarray:
    """Each design's per-op sum (each op on its own plan, the vector work after them), cycles."""
    block = evaluate_block(designs, op_arrays(wl), DEFAULT_ENERGY, area_coefficients(), reuse=True,
                           scorers=COMPILER_SCORERS)
    vector = vector_columns(designs, workload_vector_ops(wl), DEFAULT_ENERGY, block.vdd, walks=COMPILER_WALKS)
    columns, _ = totals(block, designs.rows, designs.cols, vector)
    return np.where(columns["feasible"], columns["total_cycles"], np.nan)


def spearman_top(a: np.ndarray, b: np.ndarray, top: int) -> float:
    """Spearman rank correlation of ``a`` and ``b`` over the ``top`` designs best (least) under ``b``."""
    pick = np.argsort(b, kind="stable")[:top]
    ra = np.argsort(np.argsort(a[pick], kind="stable"), kind="stable")
    rb = np.argsort(np.argsort(b[pick], kind="stable"), kind="stable")
    return float(np.corrcoef(ra, rb)[0, 1]) if pick.size > 1 else float("nan")


def deviation(a: np.ndarray, walk: np.ndarray) -> str:
    """Max and median of ``|a - walk| / walk``, in %."""
    dev = np.abs(a - walk) / walk
    return f"max {100 * dev.max():7.3f} %, median {100 * np.median(dev):7.3f} %"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=int, default=40, help="random designs per workload")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args()
    columns = random_columns(args.designs, args.seed)
    designs = perf_model.DesignArrays.from_columns(**columns)
    print(f"{args.designs} random designs with the vector unit (seed {args.seed}); top {TOP} for the rank correlation")
    for spec in args.workloads.split(","):
        wl = workloads.resolve(spec)
        start, cpu = time.perf_counter(), time.process_time()
        table = perf_model.evaluate_designs(designs, wl)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        ok = np.asarray(table.feasible, dtype=bool)
        separate = per_op_sum(designs, wl)
        walk = np.full(len(designs), np.nan)
        single = np.zeros(len(designs), dtype=bool)
        for i in np.flatnonzero(ok):
            figures = network_figures(designs.config(int(i)), wl)
            if figures is not None and "total_cycles" in figures:
                walk[i] = figures["total_cycles"]
                single[i] = True
            else:
                walk[i] = separate[i]  # the op-by-op programs: what the ops' own programs add up to
        recorded = np.asarray(table.total_cycles, dtype=np.float64)
        print(f"\n{spec}: {ok.sum()} feasible, {single.sum()} as one program; evaluate_designs "
              f"{wall / len(designs):.3f} s wall, {cpu / len(designs):.3f} s CPU a design (the walk included)")
        if not ok.any():
            continue
        r, w, s = recorded[ok], walk[ok], separate[ok]
        print(f"  recorded figure vs program walk: {deviation(r, w)}; "
              f"rank correlation of the top {min(TOP, ok.sum())}: {spearman_top(r, w, TOP):.3f}")
        print(f"  per-op sum (main's figure) vs program walk: {deviation(s, w)}; "
              f"rank correlation of the top {min(TOP, ok.sum())}: {spearman_top(s, w, TOP):.3f}")
        if single.any():
            w1, s1 = walk[single], separate[single]
            print(f"  the {single.sum()} one programs vs their per-op sums: {deviation(s1, w1)}; one program > "
                  f"per-op sum on {(w1 > s1).sum()}, by up to {100 * np.max(w1 / s1 - 1):.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
