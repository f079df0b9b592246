"""A stand-in for nextpnr in tests: ``rtl_gen``'s flow replaced by captured output of a real run.

The report is ``rtl_gen.tools.fpga.summarise`` of the files in ``tests/rtl_gen/data`` (Yosys 0.70 and
nextpnr 0.11.1 on ``tiny``, ECP5-85k): real tool output, read by the real parser; only the
minutes of place and route are skipped. Reports go through the real cache (point
``ACCEL_DSE_CACHE_DIR`` at a temporary folder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent / "rtl_gen" / "data"


def captured_report(freq_mhz: float) -> dict[str, Any]:
    """The summary of the captured ``tiny`` run (Fmax 60.71 MHz, 16 MULT18X18D, 12 DP16KD)."""
    from rtl_gen import FAMILIES
    from rtl_gen.tools.fpga import parse_yosys_cells, summarise

    cells = parse_yosys_cells((DATA / "ecp5_tiny_stat.txt").read_text(encoding="utf-8"))
    log = (DATA / "ecp5_tiny_pnr.log").read_text(encoding="utf-8")
    report = json.loads((DATA / "ecp5_tiny_report.json").read_text(encoding="utf-8"))
    return summarise(FAMILIES["ecp5"], cells, log, report, 0, "", freq_mhz)


def stub_flow(monkeypatch: pytest.MonkeyPatch, cache: Path, *, error: Exception | None = None) -> list[dict[str, Any]]:
    """Replace ``rtl_gen.tools.fpga.fpga_flow``; returns the list of its calls (``verilog``, ``top`` and keywords)."""
    import rtl_gen.tools.fpga as fpga_mod

    calls: list[dict[str, Any]] = []

    def flow(verilog: str, top: str, **kw: Any) -> dict[str, Any]:
        calls.append({"verilog": verilog, "top": top, **kw})
        if error is not None:
            raise error
        return {"family": kw["family"], "device": kw["device"], "top": top, "freq_mhz": kw["freq_mhz"],
                "seed": kw["seed"], "out_of_context": True, **captured_report(kw["freq_mhz"]),
                "seconds": {"synth": 1.0, "pnr": 2.0}, "tools": {}}

    monkeypatch.setattr(fpga_mod, "fpga_flow", flow)
    monkeypatch.setenv("ACCEL_DSE_CACHE_DIR", str(cache))
    return calls
