# amaranth: UnusedElaboratable=no
"""The ECP5 resource and Fmax models (``perf_model``) against nextpnr, and their fits.

nextpnr figures come from ``bench/fpga_measured.json``: for each calibration design the
TRELLIS_COMB / TRELLIS_FF / MULT18X18D / DP16KD used, the post-route Fmax and critical path
of ``rtl_gen.fpga_report`` (Yosys ``synth_ecp5`` + nextpnr-ecp5 on an 85k out of context,
seed 1), with the commit of the RTL it was measured on. ``--measure NAME ...`` runs the flow
on the current RTL for those designs (cached; minutes each the first time) and updates the
record; without it nothing is placed and routed.

Printed: the resource model's fitted terms (fixed and per buffer lane, least squares on all
designs) and its error per design, fitted and leave-one-out; then the Fmax model's path fits
(``perf_model.fpga.fmax``: delay = base + per step * sqrt(PEs), output-stage path from the
designs above, PE MAC path from the ``pe_paths`` points measured before the output stage
existed) and its error per design, fitted and leave-one-out.

    python bench/fpga_resources.py [--measure 8x8-is ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np

from accel_dse.design_files import load_preset
from accel_spec.config import ArrayConfig
from perf_model import ECP5_FIT, DesignArrays, FmaxFit, FpgaFit, fpga_fmax_arrays, fpga_resources

RECORD = Path(__file__).with_name("fpga_measured.json")
RESOURCES = ("luts", "ffs", "dsps", "brams")
_BEL = {"luts": "TRELLIS_COMB", "ffs": "TRELLIS_FF", "dsps": "MULT18X18D", "brams": "DP16KD"}
_BASE = {"input_bits": 8, "acc_bits": 32, "clock_mhz": 100.0}


def _kib(i: int, w: int, o: int) -> dict[str, int]:
    return {"ifmap_sram_kib": i, "weight_sram_kib": w, "ofmap_sram_kib": o}


DESIGNS: dict[str, ArrayConfig] = {
    "tiny": load_preset("tiny"),
    "2x2-ws": ArrayConfig(rows=2, cols=2, dataflow="ws", **_kib(2, 2, 2), **_BASE),
    "4x4-os": ArrayConfig(rows=4, cols=4, dataflow="os", **_kib(4, 4, 8), **_BASE),
    "8x4-ws": ArrayConfig(rows=8, cols=4, dataflow="ws", **_kib(4, 4, 8), **_BASE),
    "8x8-is": ArrayConfig(rows=8, cols=8, dataflow="is", **_kib(16, 16, 32), **_BASE),
    "4x4-ws-16b": ArrayConfig(rows=4, cols=4, dataflow="ws", input_bits=16, acc_bits=48, clock_mhz=100.0,
                              **_kib(8, 8, 16)),
}


def measure(name: str) -> dict[str, object]:
    """nextpnr's figures of ``DESIGNS[name]`` on the current RTL (``rtl_gen.fpga_report``, cached)."""
    from rtl_gen import fpga_report

    rep = fpga_report(DESIGNS[name], family="ecp5", device="85k")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent, check=False).stdout.strip()
    used = {r: rep["utilisation"].get(_BEL[r], {}).get("used", 0) for r in RESOURCES}
    path = rep["critical_path"] or {}
    return {"rtl": commit, **used, "fmax_mhz": rep["fmax_mhz"]["clk"],
            "path": {k: path.get(k) for k in ("from", "to", "delay_ns", "logic_ns")}}


def fit_resources(names: list[str], measured: dict[str, dict]) -> FpgaFit:
    """Least-squares fixed and per-lane terms of FFs and LUTs over ``names``."""
    terms = {}
    for res in ("ffs", "luts"):
        rows, rhs = [], []
        for name in names:
            cfg = DESIGNS[name]
            rows.append([1.0, float(cfg.rows + 2 * cfg.cols)])
            structural = fpga_resources(cfg, FpgaFit(0.0, 0.0, 0.0, 0.0))[res]  # the model without fitted terms
            rhs.append(measured[name][res] - structural)
        solution = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]
        terms[f"{res[:-1]}_fixed"], terms[f"{res[:-1]}_per_lane"] = (round(float(x), 1) for x in solution)
    return FpgaFit(**terms)


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``(base, slope)`` of ``delay = base + slope * x`` (a constant for one distinct x)."""
    x, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    if np.ptp(x) == 0:
        return float(y.mean()), 0.0
    slope, base = np.polyfit(x, y, 1)
    return float(base), float(slope)


def fit_fmax(out_points: list[tuple[ArrayConfig, float]], pe_points: list[tuple[ArrayConfig, float]]) -> FmaxFit:
    """Path fits: output stage on the 32-bit ``out_points`` (the wider ones: its per-bit term), PE path on
    the WS/IS ``pe_points``, OS extra from the OS ones."""
    spread = lambda cfg: float(np.sqrt(cfg.rows * cfg.cols))  # noqa: E731
    out_base, out_slope = _line([(spread(c), d) for c, d in out_points if c.acc_bits <= 32])
    wide = [(d - out_base - out_slope * spread(c)) / (c.acc_bits - 32) for c, d in out_points if c.acc_bits > 32]
    pe_base, pe_slope = _line([(spread(c), d) for c, d in pe_points if c.dataflow.value != "os"])
    os_extra = [d - (pe_base + pe_slope * spread(c)) for c, d in pe_points if c.dataflow.value == "os"]
    return FmaxFit(pe_ns=round(pe_base, 3), pe_per_step_ns=round(pe_slope, 3),
                   pe_os_extra_ns=round(float(np.mean(os_extra)) if os_extra else 0.0, 3),
                   output_stage_ns=round(out_base, 3), output_stage_per_step_ns=round(out_slope, 3),
                   output_stage_per_acc_bit_ns=round(float(np.mean(wide)), 3) if wide else 0.0)


def _fmax(cfg: ArrayConfig, fit: FmaxFit) -> float:
    return float(fpga_fmax_arrays(DesignArrays.from_configs([cfg]), fit)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--measure", nargs="*", default=[], choices=list(DESIGNS), metavar="NAME",
                        help=f"place and route these designs on the current RTL first ({', '.join(DESIGNS)})")
    args = parser.parse_args()
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    for name in args.measure:
        record["designs"][name] = measure(name)
        RECORD.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    measured = {n: record["designs"][n] for n in DESIGNS if n in record["designs"]}
    names = list(measured)

    everything = fit_resources(names, measured)
    print(f"shipped resource fit (perf_model.ECP5_FIT): {dataclasses.asdict(ECP5_FIT)}")
    print(f"resource fit on all {len(names)} designs: {dataclasses.asdict(everything)}")
    print("per resource: tool, shipped-fit model and error, error of the fit on all, leave-one-out error")
    print(f"{'design':>10} {'rtl':>8}  " + "  ".join(f"{r + ' tool/model/err/all/LOO':>38}" for r in RESOURCES))
    for name in names:
        cfg = DESIGNS[name]
        shipped, model = fpga_resources(cfg), fpga_resources(cfg, everything)
        loo = fpga_resources(cfg, fit_resources([n for n in names if n != name], measured))
        cells = []
        for res in RESOURCES:
            got = measured[name][res]
            err = [100 * (m[res] - got) / got for m in (shipped, model, loo)]
            cells.append(f"{got:>6} {shipped[res]:>6} {err[0]:>+6.1f} % {err[1]:>+6.1f} % {err[2]:>+6.1f} %")
        print(f"{name:>10} {measured[name]['rtl']:>8}  " + "  ".join(f"{c:>38}" for c in cells))

    out_points = [(DESIGNS[n], measured[n]["path"]["delay_ns"]) for n in names]
    pe_points = [(DESIGNS[p["design"]], p["delay_ns"]) for p in record["pe_paths"]]
    fit = fit_fmax(out_points, pe_points)
    print(f"\nFmax fit (delay = base + per step * sqrt(PEs) [+ per acc bit beyond 32], ns): "
          f"{dataclasses.asdict(fit)}")
    print("PE MAC path points (before the output stage, rtl " + record["pe_paths_rtl"] + "): "
          + ", ".join(f"{p['design']} {p['delay_ns']:.2f} ns" for p in record["pe_paths"]))
    print(f"{'design':>10} {'path':>28} {'ns':>6} {'tool MHz':>9} {'model MHz':>10} {'err':>7} {'LOO err':>8}")
    for name in names:
        cfg, got = DESIGNS[name], measured[name]["fmax_mhz"]
        loo = fit_fmax([p for n, p in zip(names, out_points, strict=True) if n != name], pe_points)
        model, left_out = _fmax(cfg, fit), _fmax(cfg, loo)
        path = measured[name]["path"]
        err, loo_err = 100 * (model - got) / got, 100 * (left_out - got) / got
        print(f"{name:>10} {path['from'] + ' -> ' + path['to'].split('_TRELLIS')[0]:>28} {path['delay_ns']:>6.2f} "
              f"{got:>9.2f} {model:>10.2f} {err:>+6.1f} % {loo_err:>+7.1f} %")


if __name__ == "__main__":
    main()
