"""The ``tpu-v1`` preset's area by unit, clock, supply and busy power against TPU v1's published figures.

N. Jouppi et al., "In-Datacenter Performance Analysis of a Tensor Processing Unit", ISCA 2017:
28 nm, 700 MHz, a die of at most 331 mm^2 ("less than half the size of Haswell", 662 mm^2)
whose floor plan (Figure 2) gives the unified buffer 29 %, the matrix unit 24 %, the
accumulators 6 % and control 2 %; Table 2: 40 W busy, 28 W idle per die. The model's parts
(:func:`perf_model.physical.design_area.area_parts_mm2`): the ifmap buffer is the unified buffer, the PE
array with its skew registers the matrix unit, the ofmap buffer the accumulators, and control
the controller, memory system (DMA, command queue) and checksum unit. The weight FIFO and the
output stage (TPU v1's activation pipeline) are printed but not compared: the floor plan gives
them no separate share. Busy power: the 4096^3 int8 GEMM with int8 outputs, split into on-die
power and DRAM (device and interface) power.

Usage: ``.venv/bin/python bench/tpu_v1_physical.py [--design tpu-v1]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402
from perf_model.arrays.designs import DesignArrays  # noqa: E402
from perf_model.physical.design_area import area_parts_mm2  # noqa: E402
from perf_model.physical.format_cost import pe_cell_codes  # noqa: E402
from perf_model.physical.technology import nominal_vdd  # noqa: E402

#: TPU v1's die bound (mm^2) and floor-plan shares of the parts the preset models.
DIE_MM2 = 331.0
SHARES = {"buffers": 0.29, "array": 0.24, "accumulators": 0.06, "control": 0.02}
LABELS = {"buffers": "unified buffer (ifmap)", "array": "matrix unit (PE array)",
          "accumulators": "accumulators (ofmap)", "control": "control"}
BUSY_W, CLOCK_MHZ = 40.0, 700.0
WORKLOAD = "gemm:m=4096,k=4096,n=4096,requant=1"


def parts_of(config: object) -> dict[str, float]:
    """The model's floor-plan area by part of one design, mm^2."""
    d = DesignArrays.from_configs([config])
    kib = (d.ifmap_sram_kib, d.weight_sram_kib, d.ofmap_sram_kib)
    cells = pe_cell_codes(d.weight_format, d.act_format, d.pack_int4)
    parts = area_parts_mm2(d.rows, d.cols, d.dataflow, d.input_bits, d.acc_bits, kib, d.tech_nm,
                           shadow=d.shadow_stationary, double_buffered=d.double_buffered, checksum=d.checksum,
                           weight_format=cells)
    return {name: float(value[0]) for name, value in parts.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", default="tpu-v1", help="design preset or TOML (default tpu-v1)")
    args = parser.parse_args()
    config = load_design(args.design)
    parts = parts_of(config)
    print(f"design {args.design}: {config.rows}x{config.cols} at {config.tech_nm} nm, {config.clock_mhz:g} MHz")
    print("| part | model mm^2 | paper mm^2 (share of <= 331) | model / paper |")
    print("|---|---|---|---|")
    for name, share in SHARES.items():
        paper = share * DIE_MM2
        print(f"| {LABELS[name]} | {parts[name]:.1f} | {paper:.1f} ({share:.0%}) | {parts[name] / paper:.2f} |")
    model_dp = sum(parts[name] for name in SHARES)
    paper_dp = sum(SHARES.values()) * DIE_MM2
    print(f"| datapath (the four above) | {model_dp:.1f} | {paper_dp:.1f} (61%) | {model_dp / paper_dp:.2f} |")
    print(f"| weight FIFO (weight buffer), not compared | {parts['weights']:.1f} | - | - |")
    print(f"| output stage (activation pipeline), not compared | {parts['output_stage']:.1f} | - | - |")
    print(f"| whole design | {parts['logic'] + parts['sram']:.1f} | <= {DIE_MM2:.0f} (die) | - |")
    result = perf_model.evaluate(config, workloads.resolve(WORKLOAD))
    t = result.total
    br = t["energy_breakdown"]
    dram_pj = br["dram"] + br["vector_dram"]
    dram_w = dram_pj * 1e-12 / t["latency_s"]
    on_die_w = t["power_w"] - dram_w
    print()
    print(f"clock {config.clock_mhz:g} MHz (paper {CLOCK_MHZ:g}); model f_max {t['f_max_mhz']:.0f} MHz; "
          f"supply {t['vdd']:.3f} V (node nominal {float(nominal_vdd(config.tech_nm)):.2f} V)")
    print(f"busy power on {WORKLOAD}: on-die {on_die_w:.1f} W + DRAM {dram_w:.1f} W = {t['power_w']:.1f} W "
          f"(paper {BUSY_W:g} W busy, 28 W idle): model / paper {t['power_w'] / BUSY_W:.2f}")
    print(f"on-die power density {on_die_w / t['area_mm2']:.3f} W/mm^2 over {t['area_mm2']:.1f} mm^2")
    print("energy by part (mJ): " + ", ".join(f"{k} {v * 1e-9:.2f}" for k, v in br.items() if v))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
