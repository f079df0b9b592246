"""CPU time of the exhaustive ``edge-int8`` grid on ResNet-18, measured on blocks and extrapolated.

The grid sampler scores the space in chunks of consecutive points (``accel_dse.search.scoring.grid``),
the last field fastest; the points sharing ``(rows, cols, dataflow)`` are consecutive, one block each
(every buffer size, DRAM rate, clock and buffering of that array). A conv's cost per block depends on
its kind: weight-stationary with ``R == C`` (conv programs and chains of convs on chip), other
weight-stationary arrays (conv programs), OS and IS (the GEMM model alone). This script scores
``--blocks`` blocks of each kind, the middles of equal parts of its arrays (ordered by size), in a
fresh process one after the other as the grid sampler would (chunks of 32,768; caches warm only
from the blocks before), and prints the CPU seconds per block and the whole grid's CPU time
extrapolated per kind (blocks of a kind x their mean). Nothing is asserted.

Run: ``.venv/bin/python bench/conv_grid.py [--blocks 2] [--repo PATH]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=2, help="blocks measured per kind")
    parser.add_argument("--repo", default=str(HERE.parent), help="checkout whose model is measured")
    parser.add_argument("--chunk", type=int, default=32_768, help="designs per model call")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.repo).resolve()))
    import workloads
    from accel_dse.search.scoring.evaluator import ModelEvaluator
    from accel_dse.search.space.space_file import load_space

    space = load_space("edge-int8")
    axes = space.grid_axes()
    names = [p.field for p, _ in axes]
    counts = [len(v) for _, v in axes]
    size = int(np.prod(counts))
    block = int(np.prod(counts[3:]))  # points of one (rows, cols, dataflow)
    assert names[:3] == ["rows", "cols", "dataflow"], names
    rows, cols, flows = (list(v) for _, v in axes[:3])
    kinds: dict[str, list[int]] = {"ws R==C": [], "ws R!=C": [], "os": [], "is": []}
    for b in range(len(rows) * len(cols) * len(flows)):
        r, c, f = rows[b // (len(cols) * len(flows))], cols[b // len(flows) % len(cols)], flows[b % len(flows)]
        kind = f if f != "ws" else ("ws R==C" if r == c else "ws R!=C")
        kinds[kind].append(b)
    evaluator = ModelEvaluator([("resnet18", 1.0, workloads.resolve("resnet18"))])
    evaluator.evaluate_columns(space.grid_columns(0, 8))  # imports
    print(f"model from {args.repo}; edge-int8: {size:,} points, blocks of {block:,} points "
          f"({', '.join(f'{k}: {len(v)}' for k, v in kinds.items())}); load average {os.getloadavg()[0]:.2f}")
    total = 0.0
    for kind, blocks in kinds.items():
        k = min(args.blocks, len(blocks))
        picks = [blocks[int((i + 0.5) * len(blocks) / k)] for i in range(k)]  # the middle of k equal parts
        spent = []
        for b in picks:
            cpu = time.process_time()
            for start in range(b * block, (b + 1) * block, args.chunk):
                evaluator.evaluate_columns(space.grid_columns(start, min(start + args.chunk, (b + 1) * block)))
            spent.append(time.process_time() - cpu)
            cols_b = space.grid_columns(b * block, b * block + 1)
            print(f"  {kind:8s} block {int(cols_b['rows'][0])}x{int(cols_b['cols'][0])}: {spent[-1]:7.1f} s CPU "
                  f"({block / spent[-1]:,.0f} designs per CPU second)")
        total += np.mean(spent) * len(blocks)
    print(f"whole grid ({size:,} points), extrapolated: {total:,.0f} CPU s = {total / 2 / 60:.1f} min on 2 cores "
          f"({size / total:,.0f} designs per CPU second); load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
