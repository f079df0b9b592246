"""SRAM and logic density per node: the published figures the model uses against the old square law.

Per node: the high-density SRAM cell (``perf_model.physical.node_density.SRAM_CELL_UM2``), the
model's area per stored bit in a macro (cell / 0.6) and on the floor plan (also / 0.45), the
density that gives in Mb/mm^2, the old model's floor-plan-free figure ``0.577 * (tech / 45)^2``,
and the logic area factor against ``(tech / 45)^2``. Also the published macros the efficiency is
checked on (cells / macro area).

Usage: ``.venv/bin/python bench/node_density.py``
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf_model.physical.node_density import SRAM_MACRO_MB_PER_MM2, logic_area_scale, sram_cell_scale  # noqa: E402
from perf_model.physical.pe_area import area_coefficients  # noqa: E402

NODES = (45, 32, 28, 22, 16, 12, 10, 7, 5, 3)


def main() -> int:
    k = area_coefficients()
    print("| node nm | cell um^2 | macro um^2/bit | floor plan um^2/bit | Mb/mm^2 (floor plan) | old model um^2/bit "
          "| logic factor | (tech/45)^2 |")
    print("|---|---|---|---|---|---|---|---|")
    for tech in NODES:
        cell = k.sram_cell_um2 * float(sram_cell_scale(tech))
        macro = float(k.sram_um2_per_bit(tech))
        plan = macro / k.floorplan_utilisation
        old = k.sram_cell_um2 / k.sram_efficiency * (tech / 45) ** 2
        print(f"| {tech} | {cell:.4f} | {macro:.4f} | {plan:.4f} | {1 / plan:.2f} | {old:.4f} | "
              f"{float(logic_area_scale(tech)):.4f} | {(tech / 45) ** 2:.4f} |")
    print()
    print("published high-density macros (cells / macro area, the check on sram_efficiency = "
          f"{k.sram_efficiency:g}):")
    for name, (mb, cell) in SRAM_MACRO_MB_PER_MM2.items():
        print(f"  {name}: {mb} Mb/mm^2 over a {cell} um^2 cell: efficiency {cell * mb:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
