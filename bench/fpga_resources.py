# amaranth: UnusedElaboratable=no
"""The ECP5 resource model (``perf_model.fpga_resources``) against nextpnr, and its fit.

For each calibration design: ``rtl_gen.fpga_report`` (Yosys ``synth_ecp5`` + nextpnr on an
ECP5-85k out of context, cached; ~1 min each the first time), then the model. The two fitted
terms per resource (fixed, per buffer lane) are solved by least squares on all designs and,
to show how the model does on a design it has not seen, on all but one (leave one out).

    python bench/fpga_resources.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from accel_dse.config import ArrayConfig
from accel_dse.designs import load_preset
from perf_model import FpgaFit, fpga_resources
from rtl_gen import fpga_report

_BASE = {"input_bits": 8, "acc_bits": 32, "clock_mhz": 100.0}
DESIGNS: dict[str, ArrayConfig] = {
    "tiny": load_preset("tiny"),
    "2x2-ws": ArrayConfig(rows=2, cols=2, dataflow="ws", ifmap_sram_kib=2, weight_sram_kib=2, ofmap_sram_kib=2,
                          **_BASE),
    "4x4-os": ArrayConfig(rows=4, cols=4, dataflow="os", ifmap_sram_kib=4, weight_sram_kib=4, ofmap_sram_kib=8,
                          **_BASE),
    "8x4-ws": ArrayConfig(rows=8, cols=4, dataflow="ws", ifmap_sram_kib=4, weight_sram_kib=4, ofmap_sram_kib=8,
                          **_BASE),
}


def tool(config: ArrayConfig) -> dict[str, int]:
    rep = fpga_report(config, family="ecp5", device="85k")
    used = {k: v["used"] for k, v in rep["utilisation"].items()}
    return {"luts": used.get("TRELLIS_COMB", 0), "ffs": used.get("TRELLIS_FF", 0),
            "dsps": used.get("MULT18X18D", 0), "brams": used.get("DP16KD", 0), "fmax": rep["fmax_mhz"]["clk"]}


def fit(names: list[str], measured: dict[str, dict[str, int]]) -> FpgaFit:
    """Least-squares fixed and per-lane terms of FFs and LUTs over ``names``."""
    terms = {}
    for res in ("ffs", "luts"):
        rows, rhs = [], []
        for name in names:
            cfg = DESIGNS[name]
            lanes = cfg.rows + 2 * cfg.cols
            rows.append([1.0, float(lanes)])
            structural = fpga_resources(cfg, FpgaFit(0.0, 0.0, 0.0, 0.0))[res]  # the model without fitted terms
            rhs.append(measured[name][res] - structural)
        solution = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]
        terms[f"{res[:-1]}_fixed"], terms[f"{res[:-1]}_per_lane"] = (round(float(x), 1) for x in solution)
    return FpgaFit(**terms)


def main() -> None:
    measured = {name: tool(cfg) for name, cfg in DESIGNS.items()}
    everything = fit(list(DESIGNS), measured)
    print(f"fit on all {len(DESIGNS)} designs: {dataclasses.asdict(everything)}")
    print(f"{'design':>8} {'fmax':>6}  " + "  ".join(f"{r + ' tool/model/err (LOO err)':>34}" for r in
                                                   ("luts", "ffs", "dsps", "brams")))
    for name, cfg in DESIGNS.items():
        model = fpga_resources(cfg, everything)
        loo = fpga_resources(cfg, fit([n for n in DESIGNS if n != name], measured))
        cells = []
        for res in ("luts", "ffs", "dsps", "brams"):
            got = measured[name][res]
            err = 100 * (model[res] - got) / got
            loo_err = 100 * (loo[res] - got) / got
            cells.append(f"{got:>7} {model[res]:>7} {err:>+6.1f} % ({loo_err:>+6.1f} %)")
        print(f"{name:>8} {measured[name]['fmax']:>6.1f}  " + "  ".join(f"{c:>34}" for c in cells))


if __name__ == "__main__":
    main()
