"""Dynamic energy per node: the published FinFET anchor against the old planar rule, before and after.

``perf_model.physical.energy.tech_energy_scale`` was ``(tech / 45) * (V(tech) / 0.9) ** 2`` at every
node; below 28 nm it now follows the published 7 nm figures (TPUv4i's Table 2, Jouppi et al.,
ISCA 2021: the int8 MAC 0.3 -> 0.10 pJ), log-log from 28 nm. This prints, per node, the two
factors and the int8 MAC energy at nominal supply; then the presets and the anchor chips' energy
with the old rule and the new one; then the ``datacenter-bert`` space (7 nm) on a seeded sample of
its designs: the Pareto front of latency, energy and area, and the DRAM share of the front's
energy, before and after. "Before" swaps the old rule in for the model's scale (this process only).

Usage: ``.venv/bin/python bench/node_energy.py [--designs 400] [--seed 0]``
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from anchor_chips import EYERISS, TPU_V4I, alexnet_conv  # noqa: E402
from space_sample import space_sample  # noqa: E402

import perf_model  # noqa: E402
import perf_model.evaluator.design_ops as design_ops  # noqa: E402
import perf_model.evaluator.vector_work as vector_work  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402
from accel_dse.search import ModelEvaluator  # noqa: E402
from accel_dse.search.space.trial_values import pareto_mask  # noqa: E402
from perf_model.physical.energy import _planar_scale, tech_energy_scale  # noqa: E402

NODES = (45, 28, 22, 16, 12, 10, 7, 5, 3)
CASES = (("edge", "resnet18"), ("tpu-v1", "gemm:m=4096,k=4096,n=4096,requant=1"))


@contextmanager
def old_rule() -> Iterator[None]:
    """The model with the old planar rule at every node (the two modules that read the scale)."""
    saved = design_ops.tech_energy_scale, vector_work.tech_energy_scale
    design_ops.tech_energy_scale = vector_work.tech_energy_scale = _planar_scale
    try:
        yield
    finally:
        design_ops.tech_energy_scale, vector_work.tech_energy_scale = saved


def both(run: Callable[[], float]) -> tuple[float, float]:
    """``run()`` under the old rule, then under the model's."""
    with old_rule():
        before = run()
    return before, run()


def front(columns: dict[str, np.ndarray], evaluator: ModelEvaluator) -> dict[str, float]:
    """The Pareto front (latency, energy, area) of the sample and its figures."""
    batch = evaluator.evaluate_columns(columns)
    m, ok = batch.metrics, np.asarray(batch.feasible) & (batch.metrics["power_w"] <= 75)
    values = np.stack([m["latency_s"], m["energy_pj"], m["area_mm2"]], axis=1)[ok]
    mask = pareto_mask(values)
    energy = m["energy_pj"][ok][mask]
    return {"feasible": int(ok.sum()), "front": int(mask.sum()), "energy_min_mj": float(energy.min()) * 1e-9,
            "energy_max_mj": float(energy.max()) * 1e-9,
            "density_max": float(m["power_density_w_mm2"][ok][mask].max())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| node nm | old rule | published-anchored | int8 MAC pJ (old) | int8 MAC pJ (new) |")
    print("|---|---|---|---|---|")
    for tech in NODES:
        old, new = float(_planar_scale(tech)), float(tech_energy_scale(tech))
        print(f"| {tech} | {old:.3f} | {new:.3f} | {0.3 * old:.4f} | {0.3 * new:.4f} |")
    print()
    print("| design | workload | energy before (mJ) | after (mJ) | after / before |")
    print("|---|---|---|---|---|")
    cases = [(name, load_design(name), spec, workloads.resolve(spec)) for name, spec in CASES]
    cases += [("Eyeriss", EYERISS, "alexnet CONV, batch 4", alexnet_conv(4)),
              ("TPUv4i", TPU_V4I, "gemm 8192^3", workloads.resolve("gemm:m=8192,k=8192,n=8192,requant=1"))]
    for name, config, label, wl in cases:
        before, after = both(lambda c=config, w=wl: float(perf_model.evaluate(c, w).total["energy_pj"]))
        print(f"| {name} ({config.tech_nm} nm) | {label} | {before * 1e-9:.3f} | {after * 1e-9:.3f} "
              f"| {after / before:.2f} |")
    print()
    columns, evaluator = space_sample("datacenter-bert", args.designs, args.seed)
    old, new = both(lambda: front(columns, evaluator))  # type: ignore[arg-type, return-value]
    print(f"datacenter-bert (7 nm), {args.designs} sampled designs (seed {args.seed}), power_w <= 75:")
    print("| rule | feasible | front size | front energy mJ (min - max) | front's max W/mm^2 |")
    print("|---|---|---|---|---|")
    for label, f in (("old", old), ("new", new)):
        print(f"| {label} | {f['feasible']} | {f['front']} | {f['energy_min_mj']:.3f} - {f['energy_max_mj']:.3f} "
              f"| {f['density_max']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
