"""Whether two versions of the analytic model give the same figures on the throughput bench's grid.

``--save FILE`` evaluates the grid of ``bench/model_throughput.py`` (15,552 designs x ResNet-18 +
BERT-base) with ``perf_model.evaluate_designs``, default tilings and ``allow_spill``, and a fifth of
it with clocks, accumulators, nodes and memories that make designs infeasible for every reason
(:func:`stress_columns`), and writes
every column of both tables (energy breakdown and reasons included) and the per design-op
arrays of ``evaluate_block`` (tiles, orders, cycles, traffic, energy by part) to an ``.npz``;
``--every N`` takes every N-th design of both (a quick check on a loaded machine).
``--compare FILE`` evaluates the same with the code in this checkout and prints, per array,
how many elements differ and the largest absolute and relative difference. Nothing is asserted:
it prints figures (and exits 1 when something differs, so a script can use it).

Run against main: save with main's tree (``git archive main | tar -x -C DIR`` and run this
file from ``DIR/bench``), then ``.venv/bin/python bench/model_identity.py --compare FILE``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model_throughput import grid_columns  # noqa: E402

import perf_model  # noqa: E402
import workloads  # noqa: E402
from perf_model.arrays.ops import op_arrays  # noqa: E402
from perf_model.compiler.scorers import COMPILER_SCORERS  # noqa: E402
from perf_model.evaluator.design_ops import evaluate_block  # noqa: E402
from perf_model.physical.energy import DEFAULT_ENERGY  # noqa: E402
from perf_model.physical.pe_area import area_coefficients  # noqa: E402

#: Designs per evaluate_block call for the per design-op arrays.
_CHUNK = 512
_BLOCK_FIELDS = ("feasible", "overflow", "compute_cycles", "total_cycles", "boundary_cycles", "folds", "macs",
                 "dram_read", "dram_write", "sram_read", "sram_write", "latency_s", "tile", "order", "resident")


def stress_columns() -> dict[str, np.ndarray]:
    """Every 5th design of the grid with clocks some cannot reach, narrow accumulators some reductions
    overflow, other nodes and memories, shadows off: the infeasible reasons of every kind."""
    columns = {k: v[::5] for k, v in grid_columns().items()}
    n = len(columns["rows"])
    cycle = np.arange(n)
    columns["clock_mhz"] = np.array([400.0, 1000.0, 2500.0])[cycle % 3]
    columns["acc_bits"] = np.where(cycle % 4 == 0, 2 * columns["input_bits"], columns["acc_bits"])
    columns["tech_nm"] = np.array([7, 28, 180])[cycle % 5 % 3]
    columns["dram"] = np.array(["none", "ddr4-3200-x64", "hbm2e"])[cycle % 7 % 3]
    columns["shadow_stationary"] = cycle % 6 != 1
    return columns


def figures(every: int = 1) -> dict[str, np.ndarray]:
    """Every figure of the grid (of every ``every``-th design of it), by name."""
    ops = [(op, c) for name in ("resnet18", "bert_base")
           for w in (workloads.resolve(name),) for op, c in zip(w.ops, w.counts, strict=True)]
    out: dict[str, np.ndarray] = {}
    for tag, spill, columns in (("", False, grid_columns()), ("spill.", True, grid_columns()),
                                ("stress.", False, stress_columns())):
        columns = {k: v[::every] for k, v in columns.items()}
        designs = perf_model.DesignArrays.from_columns(**columns)
        table = perf_model.evaluate_designs(designs, ops, allow_spill=spill)
        for f in fields(table):
            if f.name == "energy_breakdown":
                for part, values in table.energy_breakdown.items():
                    out[f"{tag}table.energy.{part}"] = values
            elif f.name in ("reason", "conv_notes"):
                out[f"{tag}table.{f.name}"] = np.array(getattr(table, f.name))
            else:
                out[f"{tag}table.{f.name}"] = getattr(table, f.name)
        opa = op_arrays(ops)
        chunks: dict[str, list[np.ndarray]] = {}
        for start in range(0, len(designs), _CHUNK):
            block = evaluate_block(designs.take(slice(start, start + _CHUNK)), opa, DEFAULT_ENERGY,
                                   area_coefficients(), allow_spill=spill, scorers=COMPILER_SCORERS)
            arrays = {name: getattr(block, name) for name in _BLOCK_FIELDS}
            arrays.update({f"energy.{k}": v for k, v in block.energy.items()})
            for name, values in arrays.items():
                chunks.setdefault(f"{tag}block.{name}", []).append(values)
        out.update({name: np.concatenate(parts, axis=-2) for name, parts in chunks.items()})
    return out


def compare(reference: dict[str, np.ndarray], current: dict[str, np.ndarray]) -> int:
    """Print per-array differences; return how many arrays differ."""
    differing = 0
    for name in sorted(set(reference) | set(current)):
        if name not in reference or name not in current:
            print(f"{name}: only in the {'reference' if name in reference else 'current'} figures")
            differing += 1
            continue
        a, b = reference[name], current[name]
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            print(f"{name}: shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}")
            differing += 1
            continue
        if a.dtype.kind in "US":
            bad = int((a != b).sum())
            print(f"{name}: {bad} of {a.size} strings differ")
        else:
            x, y = a.astype(np.float64), b.astype(np.float64)
            bad = int((~((x == y) | (np.isnan(x) & np.isnan(y)))).sum())
            with np.errstate(invalid="ignore", divide="ignore"):
                diff = np.abs(x - y)
                rel = np.where(diff > 0, diff / np.maximum(np.abs(x), np.abs(y)), 0.0)
            print(f"{name}: {bad} of {a.size} differ, max abs {np.nanmax(diff, initial=0):.3g}, "
                  f"max rel {np.nanmax(rel, initial=0):.3g}")
        differing += bad > 0
    print(f"{differing} arrays differ")
    return differing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, help="write this checkout's figures to FILE (.npz)")
    group.add_argument("--compare", type=Path, help="compare this checkout's figures with FILE")
    parser.add_argument("--every", type=int, default=1,
                        help="every N-th design of the grid and of the stress set (default 1: all of them)")
    args = parser.parse_args()
    if args.every < 1:
        parser.error(f"--every must be a positive integer, not {args.every}")
    current = figures(args.every)
    if args.save:
        np.savez_compressed(args.save, **current)
        print(f"wrote {len(current)} arrays to {args.save}")
        return 0
    with np.load(args.compare) as saved:
        reference = {k: saved[k] for k in saved.files}
    return 1 if compare(reference, current) else 0


if __name__ == "__main__":
    raise SystemExit(main())
