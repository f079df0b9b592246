"""How far the model's candidate tiling is from the exhaustive optimum, on a random sample.

For each sampled design-op pair (small buffers, 1-2 KiB each, so the tiling matters; arrays of
1-16 rows/columns, every dataflow, single and double buffered, GEMM dims up to ``--max-dim``)
every legal spill-free tiling is enumerated and scored (``tests/perf_model/tiling_testlib.py``,
the same search the tests use) and the DRAM bytes of the model's chosen tiling are divided by
the least. Printed: the sample size, how many pairs are feasible, the mean and worst ratio,
the share of pairs above the optimum and the worst pair; then the same (over the same
model-feasible pairs) with the streamed tile allowed below the model's floor
``min(D_s, max(R, C))`` (``s >= 1``), which shows what that documented rule costs.
Nothing is asserted: this prints figures.

Run: ``.venv/bin/python bench/tiling_optimality.py [--pairs N] [--seed S] [--max-dim D]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "perf_model"))

from tiling_testlib import exhaustive_optimum, random_pair  # noqa: E402

import perf_model  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5000, help="design-op pairs to sample (default 5000)")
    parser.add_argument("--seed", type=int, default=2026, help="random seed (default 2026)")
    parser.add_argument("--max-dim", type=int, default=300, help="largest GEMM dim m, k, n (default 300)")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.max_dim < 1:
        parser.error(f"--pairs and --max-dim must be positive, not {args.pairs} and {args.max_dim}")
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = []
    for _ in range(args.pairs):
        config, gemm = random_pair(rng, args.max_dim)
        result = perf_model.evaluate_op(config, gemm)
        if result.status != "ok":
            continue
        got = result.dram_read_bytes + result.dram_write_bytes
        best = exhaustive_optimum(config, gemm).bytes
        below_floor = exhaustive_optimum(config, gemm, s_min=1).bytes
        rows.append((got / best, got / below_floor, f"{config.short_name()} {config.ifmap_sram_kib}/"
                     f"{config.weight_sram_kib}/{config.ofmap_sram_kib} KiB db={config.double_buffered} "
                     f"acc{config.acc_bits} m={gemm.m} k={gemm.k} n={gemm.n}"))
    seconds = time.perf_counter() - start
    print(f"sample: {args.pairs} design-op pairs (seed {args.seed}, dims <= {args.max_dim}), "
          f"{len(rows)} feasible, {seconds:.0f} s")
    for column, title in ((0, "streamed tile >= min(D_s, max(R, C)) (the model's rule)"),
                          (1, "streamed tile >= 1 (below the model's floor)")):
        ratio = np.array([r[column] for r in rows])
        worst = int(np.argmax(ratio))
        print(f"\nchosen / exhaustive optimum DRAM bytes, {title}:")
        print(f"  mean {ratio.mean():.4f}  median {np.median(ratio):.4f}  p99 {np.quantile(ratio, 0.99):.4f}  "
              f"worst {ratio.max():.4f}")
        print(f"  above the optimum: {(ratio > 1 + 1e-9).mean():.1%} of feasible pairs; "
              f"worst pair: {rows[worst][2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
