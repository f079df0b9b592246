"""What the PEs' shadow stationary registers buy: compute cycles and utilisation, plain vs shadow.

For each case the model evaluates the same design with ``shadow_stationary = false`` (load,
stream and flush in series in every fold: ``Ds + 2R + C`` per fold) and ``true`` (folds back to
back every ``max(Ds, R, 2)`` cycles, fill and drain once per run) and prints compute cycles,
compute utilisation (MACs / (PEs * compute cycles)), total cycles with DRAM stalls, the PE
array area and the design's area. The cases are the ones issue 12 names: a batch-1 decode GEMM
(m = 1, k = n = 4096) on a 128 x 128 WS array (default 64 KiB buffers, and a 4 MiB weight
buffer so a run holds many folds), and a 4096^3 GEMM on the ``tpu-v1`` preset; plus ResNet-18
on ``edge``. Nothing is asserted: this prints figures. The RTL cycle counts equal these (the
tests hold ``rtl_gen`` to ``perf_model.timing``).

Run: ``.venv/bin/python bench/shadow_overlap.py``.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_preset  # noqa: E402
from accel_spec.config import ArrayConfig  # noqa: E402


def _row(label: str, config: ArrayConfig, workload: workloads.Workload) -> None:
    result = perf_model.evaluate(config, workload)
    compute = sum(op.compute_cycles for op in result.ops)
    total = sum(op.total_cycles for op in result.ops)
    macs = sum(op.macs for op in result.ops)
    util = macs / (config.pes * compute) if compute else 0.0
    area = result.total["area_mm2"]
    print(f"| {label} | {'shadow' if config.shadow_stationary else 'plain'} | {compute:,} | {util:.4f} "
          f"| {total:,.0f} | {area:.3f} |")


def main() -> None:
    decode = workloads.resolve("gemm:m=1,k=4096,n=4096")
    big = workloads.resolve("gemm:m=4096,k=4096,n=4096")
    resnet = workloads.resolve("resnet18")
    ws128 = ArrayConfig(rows=128, cols=128, dataflow="ws")
    cases = [
        ("decode 1x4096x4096, 128x128 WS, 64 KiB buffers", ws128, decode),
        ("decode 1x4096x4096, 128x128 WS, 4 MiB weight buffer", dataclasses.replace(ws128, weight_sram_kib=4096),
         decode),
        ("4096^3 on tpu-v1", load_preset("tpu-v1"), big),
        ("resnet18 on edge", load_preset("edge"), resnet),
    ]
    print("| case | stationary | compute cycles | compute utilisation | total cycles | area mm^2 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, config, workload in cases:
        for shadow in (False, True):
            _row(label, dataclasses.replace(config, shadow_stationary=shadow), workload)


if __name__ == "__main__":
    main()
