"""Area per node from published silicon: SRAM bit cells, logic density and floor-plan utilisation.

The area model (:mod:`perf_model.physical.pe_area`, :mod:`perf_model.physical.design_area`) prices a
design at 45 nm: logic from Yosys gate counts with NanGate FreePDK45 cells, SRAM per bit from Intel's
45 nm cell. This module
takes those figures to another node with published per-node data instead of the square of the
feature size, which at FinFET nodes overstates the shrink (5 nm is not 81x denser than 45 nm:
logic about 51x, SRAM cells about 16x).

**SRAM bit cells** (:data:`SRAM_CELL_UM2`, the high-density 6T cell of each node, µm^2):

=====  ========  ==========================================================================
node   cell      source
=====  ========  ==========================================================================
45     0.346     Intel 45 nm HK/MG (K. Mistry et al., IEDM 2007)
32     0.171     Intel 32 nm (S. Natarajan et al., IEDM 2008)
28     0.127     TSMC 28 nm HK/MG high-density cell (TSMC, IEDM 2009/2010 28 nm papers)
22     0.092     Intel 22 nm tri-gate (C. Auth et al., VLSI 2012)
16     0.070     TSMC 16 nm FinFET (S.-Y. Wu et al., IEDM 2013)
14     0.0588    Intel 14 nm (S. Natarajan et al., IEDM 2014)
10     0.042     TSMC 10 nm (as reported for TSMC N10, ISSCC 2017 / WikiChip)
7      0.027     TSMC N7 (S.-Y. Wu et al., IEDM 2016)
5      0.021     TSMC N5 (G. Yeap et al., IEDM 2019)
3      0.0199    TSMC N3 (N3B; N3E keeps N5's 0.021; reported at IEDM 2022)
=====  ========  ==========================================================================

Nodes above 45 nm keep the square law from the 45 nm cell (the issue's finding: it holds
there). Between table nodes the cell is interpolated log-log (12 nm lies between N16 and N10).

**SRAM macro efficiency** (cells / macro area, ``AreaCoefficients.sram_efficiency``): 0.6,
the model's assumption since the first area model. The published macros bound it from above:
TSMC's high-density macros reach 31.8 Mb/mm^2 on N5 (cell 0.021 µm^2), 33.55 Mb/mm^2 on N3B
(0.0199) and 38 Mb/mm^2 on N2 (0.0175) (TSMC IEDM 2024 N2 paper, as reported by Tom's Hardware
and WikiChip), i.e. cells take 0.665-0.668 of those macros. Test-chip macros are the densest a
foundry builds; compiled macros of a product's sizes and widths are less dense, so 0.6 stays.

**Logic density** (:data:`LOGIC_DENSITY_MTR_MM2`, the weighted NAND2/scan-flop transistor
density of M. Bohr, "Let's clear up the node naming mess", Intel 2017, MTr/mm^2):

=====  =======  ============================================================================
node   MTr/mm2  source
=====  =======  ============================================================================
45     3.33     Intel 45 nm (Bohr 2017)
28     8.60     the square law from 45 nm (``3.33 * (45 / 28) ** 2``; planar, holds here)
22     15.3     Intel 22 nm (Bohr 2017)
16     28.88    TSMC 16FF+ (WikiChip's density from TSMC's published pitches)
10     52.51    TSMC N10 (WikiChip)
7      91.2     TSMC N7 HD (WikiChip)
5      171.3    TSMC N5 (WikiChip; TSMC's IEDM 2019 paper claims 1.84x over N7)
3      274      TSMC N3E, 1.6x N5 (TSMC's published logic-density gain)
=====  =======  ============================================================================

A logic block at ``tech`` takes ``density(45) / density(tech)`` of its 45 nm area. Nodes
above 45 nm keep the square law. These are the densest libraries' figures; real blocks use
taller, faster cells in places, which the floor-plan utilisation below absorbs.

**Floor-plan utilisation** (``AreaCoefficients.floorplan_utilisation``, 0.45): what fraction
of a chip's floor-plan block is the cells and macros the model counts. It covers placement
utilisation (standard cells are typically placed at about 70 % row utilisation so routing
fits), the clock tree, buffers and hold fixes synthesis does not count, routing channels and
halos between macros, and the power grid. It is **calibrated on TPU v1** (N. Jouppi et al.,
"In-Datacenter Performance Analysis of a Tensor Processing Unit", ISCA 2017: the matrix unit is
24 % and the unified buffer 29 % of a die of at most 331 mm^2 at 28 nm; the model's cells and
macros for them come to 0.458 and 0.444 of those areas) and only checked elsewhere
(``docs/physical.md``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SRAM_CELL_UM2", "LOGIC_DENSITY_MTR_MM2", "REF_NM", "sram_cell_scale", "logic_area_scale",
           "FLOORPLAN_UTILISATION", "SRAM_MACRO_MB_PER_MM2"]

#: The reference node of the Yosys calibration, nm.
REF_NM = 45.0
#: High-density 6T SRAM bit cell per node, µm^2 (module docstring for sources).
SRAM_CELL_UM2: tuple[tuple[float, float], ...] = (
    (3.0, 0.0199), (5.0, 0.021), (7.0, 0.027), (10.0, 0.042), (14.0, 0.0588), (16.0, 0.070), (22.0, 0.092),
    (28.0, 0.127), (32.0, 0.171), (45.0, 0.346),
)
#: Logic transistor density per node, MTr/mm^2 (module docstring for sources).
LOGIC_DENSITY_MTR_MM2: tuple[tuple[float, float], ...] = (
    (3.0, 274.0), (5.0, 171.3), (7.0, 91.2), (10.0, 52.51), (16.0, 28.88), (22.0, 15.3),
    (28.0, 3.33 * (45.0 / 28.0) ** 2), (45.0, 3.33),
)
#: Published high-density SRAM macro densities, Mb/mm^2, with their cells (node: (Mb/mm^2, cell µm^2)):
#: the check on ``sram_efficiency`` (module docstring).
SRAM_MACRO_MB_PER_MM2: dict[str, tuple[float, float]] = {
    "N5": (31.8, 0.021), "N3B": (33.55, 0.0199), "N2": (38.0, 0.0175),
}
#: Fraction of a floor-plan block that is the counted cells and macros (calibrated on TPU v1).
FLOORPLAN_UTILISATION = 0.45


def _table_scale(table: tuple[tuple[float, float], ...], tech_nm: Any, inverse: bool) -> np.ndarray:
    """Area factor of ``tech_nm`` relative to 45 nm from a per-node table, log-log; square law above 45 nm."""
    nodes = np.log([n for n, _ in table])
    values = np.log([v for _, v in table])
    tech = np.asarray(tech_nm, dtype=np.float64)
    q = np.log(np.minimum(tech, REF_NM))
    at = np.interp(q, nodes, values)
    ref = float(np.interp(np.log(REF_NM), nodes, values))
    ratio = np.exp(ref - at) if inverse else np.exp(at - ref)
    below = np.where(tech < nodes.min(), (tech / np.exp(nodes.min())) ** 2, 1.0)  # past the table: square law
    return ratio * below * (np.maximum(tech, REF_NM) / REF_NM) ** 2


def sram_cell_scale(tech_nm: Any) -> np.ndarray:
    """SRAM cell area at ``tech_nm`` over the 45 nm cell (:data:`SRAM_CELL_UM2`; square law above 45 nm)."""
    return _table_scale(SRAM_CELL_UM2, tech_nm, inverse=False)


def logic_area_scale(tech_nm: Any) -> np.ndarray:
    """Logic area at ``tech_nm`` over its 45 nm area: ``density(45) / density(tech)``
    (:data:`LOGIC_DENSITY_MTR_MM2`; square law above 45 nm)."""
    return _table_scale(LOGIC_DENSITY_MTR_MM2, tech_nm, inverse=True)
