"""The ``tpu-v1`` preset against the TPU v1 paper's pattern: MLP/LSTM memory-bound, CNN compute-bound.

Jouppi et al., "In-Datacenter Performance Analysis of a Tensor Processing Unit", ISCA 2017:
Table 1 gives each production app's layers, weights and batch; Table 3 and the roofline show
MLPs and LSTMs far under the roof (about 10-15 % of the 92 TOPS peak) and CNN0 near it. The
apps' exact layer shapes are not published, so each row here is one GEMM layer whose weight
count and batch follow Table 1 (e.g. MLP0: 5 FC layers, 20 M weights, batch 200 ->
200 x 2048 x 2048); "CNN-like" is the issue's 4096^3 GEMM and ResNet-18 at batch 8. Outputs
leave as int8 (``requant=1``) as the TPU's activation pipeline writes them, and for the large
GEMM also as raw int32. DRAM data arrive through the RTL's AXI bus (64 bytes for ``tpu-v1``),
paced to the memory's bytes per cycle when that is less than a beat a cycle.

Printed per row: utilisation (MACs / (PEs x total cycles)), the same over compute cycles only
(what the array's shape and fill/drain allow with infinite bandwidth), compute and total cycles, DRAM
bytes, arithmetic intensity (MACs per DRAM byte) and the tiling (tile, loop order, resident
input). The table in ``docs/tpu_v1_fidelity.md`` is this bench's output.

Usage: ``.venv/bin/python bench/tpu_v1_fidelity.py [--design tpu-v1]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402

#: (row label, workload spec, the paper's pattern for it).
ROWS = (
    ("MLP0-like: 200 x 2048 x 2048 (5 layers, 20 M weights, batch 200)",
     "gemm:m=200,k=2048,n=2048,requant=1", "MLP: memory-bound, ~10-15 %"),
    ("MLP1-like: 168 x 1120 x 1120 (4 layers, 5 M weights, batch 168)",
     "gemm:m=168,k=1120,n=1120,requant=1", "MLP: memory-bound, ~10-15 %"),
    ("LSTM0-like: 64 x 1472 x 1472 (52 M weights over 24 FC layers, batch 64)",
     "gemm:m=64,k=1472,n=1472,requant=1", "LSTM: memory-bound, lower still"),
    ("LSTM1-like: 96 x 1280 x 1280 (batch 96)",
     "gemm:m=96,k=1280,n=1280,requant=1", "LSTM: memory-bound, lower still"),
    ("CNN-like: 4096 x 4096 x 4096, int8 out", "gemm:m=4096,k=4096,n=4096,requant=1", "CNN: >= 60 %"),
    ("CNN-like: 4096 x 4096 x 4096, int32 out", "gemm:m=4096,k=4096,n=4096", "(the TPU writes int8)"),
    ("ResNet-18 at batch 8 (whole network)", "resnet18:batch=8", "CNN: compute-bound layers"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", default="tpu-v1", help="design preset or TOML (default tpu-v1)")
    args = parser.parse_args()
    config = load_design(args.design)
    pes = config.rows * config.cols
    print(f"design {args.design}: {config.rows}x{config.cols} {config.dataflow.value}, {config.clock_mhz:g} MHz, "
          f"{config.dram_bytes_per_cycle:g} B/cycle, ifmap {config.ifmap_sram_kib} KiB, weight "
          f"{config.weight_sram_kib} KiB, ofmap {config.ofmap_sram_kib} KiB, double_buffered "
          f"{config.double_buffered}")
    print("| layer | paper's pattern | utilisation | of compute cycles | compute cycles | total cycles | DRAM MB | "
          "MACs/byte | tiling |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, spec, pattern in ROWS:
        result = perf_model.evaluate(config, workloads.resolve(spec))
        total = result.total
        moved = total["dram_read_bytes"] + total["dram_write_bytes"]
        util = total["macs"] / (pes * total["total_cycles"])
        ops = result.ops
        tiling = "; ".join(sorted({f"{o.tile[0]}x{o.tile[1]}x{o.tile[2]} {o.loop_order}"
                                   + (f" {o.resident.upper()} resident" if o.resident else "") for o in ops}))
        if len(ops) > 1:
            tiling = f"{len(ops)} ops"
        shape = total["macs"] / (pes * total["compute_cycles"])
        print(f"| {label} | {pattern} | {util:.1%} | {shape:.1%} | {total['compute_cycles']:,} | "
              f"{total['total_cycles']:,.0f} | {moved / 1e6:,.1f} | {total['macs'] / moved:,.0f} | {tiling} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
