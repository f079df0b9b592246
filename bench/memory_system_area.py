"""Area of the memory system (DMA engines, sequencer, control registers, glue) against the model.

For each design: Yosys synthesis of the load and store DMA engines, the sequencer (with a
2-command queue: the queue itself is SRAM, priced as SRAM by the model) and the control
registers, priced with the NanGate45 cells of ``bench/area_calibration.py``; beside it the
model's ``perf_model.memory_system_logic_um2`` for the same design (the model adds the queue's
SRAM). ``--fit`` prints the least-squares ``(fixed, per DMA word bit)`` the model's constants
come from.

Usage: ``python bench/memory_system_area.py [--fit]`` (seconds to a minute per design).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
from amaranth.back import verilog  # noqa: E402
from area_calibration import yosys_gates  # noqa: E402

import perf_model  # noqa: E402
from accel_spec.config import ArrayConfig  # noqa: E402
from rtl_gen.soc.system import memory_system_units  # noqa: E402

#: Designs measured: the shell grows with the DMA's widest DRAM word (the qparam word: 16 bytes a column).
DESIGNS = (
    ArrayConfig(rows=2, cols=2, dram_bytes_per_cycle=2),
    ArrayConfig(rows=4, cols=4, dram_bytes_per_cycle=4),
    ArrayConfig(rows=8, cols=8, dram_bytes_per_cycle=8),
    ArrayConfig(rows=16, cols=16, dram_bytes_per_cycle=8),
)


def shell(config: ArrayConfig) -> dict:
    area = flops = seconds = 0.0
    for name, _, build in memory_system_units(config):
        g = yosys_gates(name, verilog.convert(build(), name=name, emit_src=False, strip_internal_attrs=True))
        area, flops, seconds = area + g["area_um2"], flops + g["flops"], seconds + g["seconds"]
    return {"area_um2": area, "flops": int(flops), "word_bits": perf_model.dma_word_bits(config), "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", action="store_true", help="print the fitted constants")
    args = parser.parse_args()
    rows = []
    print(f"{'design':>12} {'word_bits':>9} {'flops':>6} {'yosys_um2':>10} {'model_um2':>10} {'error':>7} {'s':>5}")
    for config in DESIGNS:
        p = shell(config)
        model = float(perf_model.memory_system_logic_um2(p["word_bits"]))
        rows.append(p)
        print(flush=True, end="")
        print(f"{config.short_name():>12} {p['word_bits']:>9} {p['flops']:>6} {p['area_um2']:>10.0f} {model:>10.0f} "
              f"{model / p['area_um2'] - 1:>+7.1%} {p['seconds']:>5.0f}")
    if args.fit:
        x = np.array([[1.0, p["word_bits"]] for p in rows])
        y = np.array([p["area_um2"] for p in rows])
        fixed, per_bit = np.linalg.lstsq(x, y, rcond=None)[0]
        print(f"fit: fixed {fixed:.1f} um2, per DMA word bit {per_bit:.3f} um2")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
