"""More silicon anchors: Eyeriss (65 nm) and TPUv4i's TensorCore (7 nm), model against published.

Nothing here is fitted: every constant the model uses was set elsewhere, and these chips only
check it (held out). Which published figures set which constant:

* PE, register, select and output-stage logic: Yosys gate counts of ``rtl_gen``'s cells with
  NanGate FreePDK45 cell areas (``bench/area_calibration.py``);
* SRAM per bit: the published bit cell of each node (``perf_model.physical.node_density``) over
  the macro efficiency 0.6 (an assumption the published N5/N3 macros bound);
* logic per node: Bohr's and WikiChip's logic densities (``node_density``); 65 nm is above the
  table and keeps the square law from 45 nm;
* floor-plan utilisation 0.45: **TPU v1's floor plan** (``bench/tpu_v1_physical.py``);
* energies: Horowitz, ISSCC 2014 (45 nm) with the node scaling of ``perf_model.physical.energy``;
  leakage per node: ``perf_model.physical.technology``.

**Eyeriss** (Y.-H. Chen, T. Krishna, J. Emer, V. Sze, ISSCC 2016 14.5 and JSSC 52(1) 2017):
TSMC 65 nm, a 3.5 x 3.5 mm core (12.25 mm^2) in a 4 x 4 mm die, 168 PEs (12 x 14) of 16-bit fixed
point, a 108 KB global buffer and a 224 x 16-bit filter scratch pad per PE (73.5 KB; 181.5 KB of
SRAM in all), 1852 kgates. AlexNet's five CONV layers at batch 4, 200 MHz and 1 V: 34.7 frames/s
at 278 mW (chip power, DRAM not included). The design: 12 x 14, ``input_bits = 16``, the ifmap and
ofmap buffers the 108 KB global buffer (64 + 44 KiB), the weight buffer the filter scratch pads (74
KiB), single-buffered (Eyeriss has no ping-pong buffers), 8 B/cycle off chip (its 64-bit bus; an
assumption at the core clock). Two differences the model cannot express: row-stationary
dataflow (the model's is weight-stationary) and 16-bit partial sums (the model needs ``acc_bits =
44`` so no reduction of these layers can overflow: a wider adder and ofmap); Eyeriss also gates
the PEs on zero activations (about 45 % of the CONV energy saved in the paper) and compresses
zeros off chip, which the model does not.

**TPUv4i** (N. Jouppi et al., "Ten Lessons From Three Generations Shaped Google's TPUv4i",
ISCA 2021, Table 1): 7 nm, 1050 MHz, one TensorCore of four 128 x 128 MXUs (138 TOPS int8 /
TFLOPS bf16), 16 MiB of vector memory and 128 MiB of common memory, HBM2 at 614 GB/s, a die under
400 mm^2, TDP 175 W. The design: one 256 x 256 int8 array (the same 65,536 MACs), 144 MiB of SRAM
(64 + 64 + 16 MiB), one HBM2E stack. The die also holds the vector and scalar units, the HBM PHYs,
the inter-chip links and PCIe, none of which the model counts, and TDP is not busy power: so the
die and TDP are bounds, checked as such. The model's bf16 PE is one unpipelined cycle (f_max 763
MHz at 7 nm), so the int8 mode is the one compared.

Usage: ``.venv/bin/python bench/anchor_chips.py``
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tpu_v1_physical import parts_of  # noqa: E402

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_spec.config import ArrayConfig  # noqa: E402
from workloads.ops import Workload  # noqa: E402

#: Eyeriss as a design (module docstring for the mapping).
EYERISS = ArrayConfig(rows=12, cols=14, input_bits=16, acc_bits=44, ifmap_sram_kib=64, weight_sram_kib=74,
                      ofmap_sram_kib=44, dram_bytes_per_cycle=8.0, clock_mhz=200.0, double_buffered=False,
                      tech_nm=65)
#: Published Eyeriss figures: core mm^2, chip power W (AlexNet CONV, batch 4, 200 MHz), frames/s.
EYERISS_PAPER = {"core_mm2": 3.5 * 3.5, "power_w": 0.278, "fps": 34.7, "batch": 4}
#: TPUv4i's TensorCore as a design (module docstring).
TPU_V4I = ArrayConfig(rows=256, cols=256, ifmap_sram_kib=64 * 1024, weight_sram_kib=64 * 1024,
                      ofmap_sram_kib=16 * 1024, dram_bytes_per_cycle=1024.0, clock_mhz=1050.0, tech_nm=7, dram="hbm2e")
#: Published TPUv4i bounds: die mm^2 (under), TDP W, peak TOPS.
TPU_V4I_PAPER = {"die_mm2": 400.0, "tdp_w": 175.0, "tops": 138.0}


def alexnet_conv(batch: int = 4) -> Workload:
    """AlexNet's CONV layers (227 x 227 input) at ``batch``: the workload of Eyeriss's figures."""
    net = workloads.resolve(f"alexnet:batch={batch},res=227")
    keep = [i for i, op in enumerate(net.ops) if type(op).__name__ == "Conv2d"]
    return Workload(name=f"alexnet-conv:batch={batch}", ops=tuple(net.ops[i] for i in keep),
                    counts=tuple(net.counts[i] for i in keep))


def eyeriss_figures() -> dict[str, float]:
    """The model's Eyeriss: area, on-die power, frames/s and the rest, on AlexNet's CONV layers."""
    workload = alexnet_conv(EYERISS_PAPER["batch"])
    result = perf_model.evaluate(EYERISS, workload)
    if result.status != "ok":
        raise RuntimeError(f"the Eyeriss design is {result.status}: {result.reason}")
    t = result.total
    return {"area_mm2": t["area_mm2"], "on_die_power_w": t["on_die_power_w"], "dram_power_w": t["dram_power_w"],
            "fps": EYERISS_PAPER["batch"] / t["latency_s"], "gmacs": t["macs"] / 1e9, "vdd": t["vdd"],
            "utilization": t["utilization"], "f_max_mhz": t["f_max_mhz"],
            **{f"energy_{k}_mj": v * 1e-9 for k, v in t["energy_breakdown"].items() if v}}


def _row(name: str, model: float, paper: float, unit: str, note: str = "") -> str:
    return f"| {name} | {model:.3g} {unit} | {paper:.3g} {unit} | {model / paper:.2f} | {note} |"


def main() -> int:
    print("## Eyeriss (65 nm; held out)")
    e = eyeriss_figures()
    parts = parts_of(EYERISS)
    print("| figure | model | published | model / published | note |")
    print("|---|---|---|---|---|")
    print(_row("area", e["area_mm2"], EYERISS_PAPER["core_mm2"], "mm^2", "core 3.5 x 3.5 mm"))
    print(_row("chip power (on die)", e["on_die_power_w"], EYERISS_PAPER["power_w"], "W",
               f"AlexNet CONV, batch 4, 200 MHz; model vdd {e['vdd']:.2f} V, paper 1 V"))
    print(_row("frames/s", e["fps"], EYERISS_PAPER["fps"], "fps", f"utilisation {e['utilization']:.0%}"))
    print(_row("MACs per frame", e["gmacs"] / 4, 0.666, "G", "AlexNet CONV: 666 M (Sze et al., Proc. IEEE 2017)"))
    print("model area by part (mm^2): " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()))
    print("model energy by part (mJ, 4 frames): " + ", ".join(
        f"{k[7:-3]} {v:.2f}" for k, v in e.items() if k.startswith("energy_")))
    print(f"DRAM power (not in the published 278 mW): {e['dram_power_w'] * 1e3:.0f} mW")
    print()
    print("## TPUv4i TensorCore (7 nm, int8; bounds, held out)")
    result = perf_model.evaluate(TPU_V4I, workloads.resolve("gemm:m=8192,k=8192,n=8192,requant=1"))
    t = result.total
    print("| figure | model | published | model / published | note |")
    print("|---|---|---|---|---|")
    print(_row("area", t["area_mm2"], TPU_V4I_PAPER["die_mm2"], "mm^2", "die < 400 mm^2 (a bound)"))
    print(_row("power (on die)", t["on_die_power_w"], TPU_V4I_PAPER["tdp_w"], "W",
               f"TDP (a bound), 8192^3 int8 GEMM; vdd {t['vdd']:.2f} V"))
    print(_row("throughput", t["tops"], TPU_V4I_PAPER["tops"], "TOPS", "published: peak"))
    print("model area by part (mm^2): " + ", ".join(f"{k} {v:.1f}" for k, v in parts_of(TPU_V4I).items()))
    print("model energy by part (mJ): " + ", ".join(
        f"{k} {v * 1e-9:.1f}" for k, v in t["energy_breakdown"].items() if v))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
