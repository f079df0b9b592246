"""``accel-dse design check FILE|PRESET`` and ``accel-dse design presets``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from accel_dse.cli._output import emit, emit_json, format_table
from accel_dse.design_files import load_design, load_preset, preset_names
from accel_spec.config import IDEAL_MEMORY_LABEL, MEMORY_KINDS, NO_MEMORY, ArrayConfig, memory_label
from accel_spec.errors import ConfigError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("design", help="check design files, list presets")
    dsub = parser.add_subparsers(dest="design_command", metavar="ACTION", required=True)
    check = dsub.add_parser("check", help="validate a design file or preset and print it normalised")
    check.add_argument("design", metavar="FILE|PRESET")
    check.add_argument("--workload", metavar="W",
                       help="also check the design against workload W: an accumulator too narrow for its sums "
                       "(the width every op needs) is an error, exit 2, as under evaluate; and the power density "
                       "(on-die power over area, against max_power_density_w_mm2: it needs a workload)")
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(func=_check)
    presets = dsub.add_parser("presets", help="list the shipped presets")
    presets.add_argument("--json", action="store_true", help="print JSON")
    presets.set_defaults(func=_presets)


def _check(args: argparse.Namespace) -> int:
    import perf_model

    config = load_design(args.design)
    timing = perf_model.design_fmax(config)
    if not timing["clock_ok"]:
        raise ConfigError(f"{args.design}: {timing['reason']}")
    vdd = float(perf_model.supply_voltage(config.clock_mhz, timing["f_max_mhz"], config.tech_nm))
    accumulator = _accumulator(config, args.workload) if args.workload is not None else None
    density = _power_density(config, args.workload)
    if args.json:
        emit_json({"design": config.to_dict(), "config_hash": config.config_hash,
                   "timing": {**timing, "vdd": vdd}, "power_density": density}
                  | ({"accumulator": accumulator} if accumulator else {}))
        return 0
    emit(f"# {config.short_name()}  config_hash = {config.config_hash}")
    for line in _memory_and_node_lines(config) + _density_lines(density):
        emit(line)
    stage = timing["stages"][timing["critical"]]
    emit(f"# f_max = {timing['f_max_mhz']:.0f} MHz at {config.tech_nm} nm (critical: {timing['critical']}, "
         f"{stage['fo4']:.1f} FO4 of logic); vdd = {vdd:.3f} V at {config.clock_mhz:g} MHz")
    emit("# stages: " + ", ".join(f"{name} {s['fo4']:.1f} FO4 ({s['f_mhz']:.0f} MHz)"
                                  for name, s in timing["stages"].items()))
    if accumulator:
        emit(f"# acc_bits = {config.acc_bits} holds {accumulator['workload']}: its widest sum needs "
             f"{accumulator['needs_bits']} bits (op {accumulator['op']!r}, K = {accumulator['k']:,})")
    emit("[design]")
    for key, value in config.to_dict().items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str):
            text = f'"{value}"'
        else:
            text = repr(value)
        emit(f"{key} = {text}")
    return 0


def _accumulator(config: ArrayConfig, spec: str) -> dict[str, object] | None:
    """The accumulator width ``spec`` needs on ``config``; raises (exit 2) when ``acc_bits`` is narrower.

    Raises:
        ConfigError: the accumulator cannot hold an op's sums (the same line as ``evaluate``).
    """
    import perf_model
    import workloads
    from accel_dse.acc_width import acc_needs
    from accel_dse.cli.evaluate import refuse_narrow_accumulator

    workload = workloads.resolve(spec)
    result = perf_model.evaluate(config, workload)
    refuse_narrow_accumulator(config, workload.name, result)
    needs = acc_needs(config, result.ops, every=True)
    if not needs:
        return None
    return {"workload": workload.name, "needs_bits": needs[0]["bits"], "op": needs[0]["ops"][0], "k": needs[0]["k"]}


def _memory_and_node_lines(config: ArrayConfig) -> list[str]:
    """Which DRAM part and node the design has, saying when they are the defaults (a design that names
    no ``dram`` gets :data:`~accel_spec.config.DEFAULT_MEMORY`; ``"none"`` is ideal memory:
    ``docs/physical.md``, "DRAM as a part")."""
    import perf_model

    defaults = {f.name: f.default for f in dataclasses.fields(ArrayConfig)}
    said = " (the default)" if config.dram == defaults["dram"] else ""
    rate = float(perf_model.effective_dram_bytes_per_cycle(config.dram_bytes_per_cycle, config.dram, config.clock_mhz))
    if config.dram == NO_MEMORY:
        memory = (f'# dram = "{NO_MEMORY}": {IDEAL_MEMORY_LABEL}, chosen: bandwidth '
                  f"{config.dram_bytes_per_cycle:g} B/cycle at any clock, no DRAM energy")
    else:
        part = MEMORY_KINDS[config.dram]
        memory = (f'# dram = "{part.name}"{said}: {part.gb_per_s:g} GB/s, {part.pj_per_bit:g} pJ/bit ({part.source}); '
                  f"{rate:.4g} B/cycle at {config.clock_mhz:g} MHz (min of dram_bytes_per_cycle "
                  f"{config.dram_bytes_per_cycle:g} and the part's GB/s)")
    node = f"# tech_nm = {config.tech_nm}{' (the default)' if config.tech_nm == defaults['tech_nm'] else ''}"
    return [memory, node]


def _power_density(config: ArrayConfig, workload: str | None) -> dict[str, Any]:
    """The design's on-die power density against its ``max_power_density_w_mm2``: on ``workload``
    when given, and always the workload-independent bounds of :func:`_peak_density`. The density on
    a workload is the model's with the limit lifted, so a design over its limit still shows by how much."""
    import perf_model
    import workloads

    limit = config.max_power_density_w_mm2
    out: dict[str, Any] = {"checked": False, "limit_w_mm2": limit, "bounds": _peak_density(config)}
    if workload is None:
        return out
    result = perf_model.evaluate(dataclasses.replace(config, max_power_density_w_mm2=1e6), workloads.resolve(workload))
    if result.status != "ok":
        return out | {"workload": workload, "reason": result.reason}
    density = float(result.total["power_density_w_mm2"])
    return out | {"checked": True, "workload": workload, "power_density_w_mm2": density,
                  "on_die_power_w": float(result.total["on_die_power_w"]), "over": density > limit}


#: Energy parts of the breakdown that are not on-die dynamic energy (off-die DRAM, and leakage).
_NOT_DYNAMIC = ("dram", "vector_dram", "leakage")


def _peak_density(config: ArrayConfig) -> dict[str, Any]:
    """Workload-independent on-die power density bounds, W/mm^2 (docs/physical.md, "Power density").

    * ``floor_w_mm2``: leakage alone at the supply the clock needs (the model's leakage density): every
      workload pays it, so a design whose floor exceeds its limit is infeasible on any workload.
    * ``peak_w_mm2``: every PE does one MAC each cycle, each with the register and SRAM energy a MAC
      carries on a large GEMM (m = k = n = 4 * max(rows, cols), ideal memory so nothing waits on
      DRAM), plus leakage: an upper estimate (the vector unit and DRAM are left out: it runs between
      matrix runs, DRAM is off die); a design past it is only flagged, not refused.
    ``{"estimated": False, "reason": ...}`` when the design runs no such GEMM (an accumulator too
    narrow for any ``K`` tried).
    """
    import perf_model
    import workloads

    ideal = dataclasses.replace(config, dram=NO_MEMORY, max_power_density_w_mm2=1e6)
    side = 4 * max(config.rows, config.cols)
    result = None
    for k in (side, max(config.rows, config.cols), 16):
        result = perf_model.evaluate(ideal, workloads.resolve(f"gemm:m={side},k={k},n={side}"))
        if result.status == "ok":
            break
    if result is None or result.status != "ok":
        return {"estimated": False, "reason": result.reason if result is not None else ""}
    t = result.total
    parts = t["energy_breakdown"]
    dynamic_pj_per_mac = sum(v for name, v in parts.items() if name not in _NOT_DYNAMIC) / float(t["macs"])
    leakage_w = parts["leakage"] * 1e-12 / t["latency_s"]
    dynamic_w = dynamic_pj_per_mac * 1e-12 * config.rows * config.cols * config.clock_mhz * 1e6
    area = float(t["area_mm2"])
    floor = leakage_w / area
    return {"estimated": True, "area_mm2": area, "floor_w_mm2": floor, "peak_w_mm2": (dynamic_w + leakage_w) / area,
            "peak_power_w": dynamic_w + leakage_w, "dynamic_pj_per_mac": dynamic_pj_per_mac,
            "infeasible": floor > config.max_power_density_w_mm2}


def _density_lines(density: dict[str, Any]) -> list[str]:
    """The density bounds from the clock and size alone, then the density on the workload (or why not)."""
    limit = f"max_power_density_w_mm2 = {density['limit_w_mm2']:g}"
    bounds = density["bounds"]
    if not bounds["estimated"]:
        lines = [f"# power density bounds: not estimated ({bounds['reason']}); {limit}"]
    else:
        floor, peak = bounds["floor_w_mm2"], bounds["peak_w_mm2"]
        if bounds["infeasible"]:
            verdict = "infeasible: leakage alone is OVER the limit, on any workload"
        elif peak > density["limit_w_mm2"]:
            verdict = "the peak is over the limit: a busy workload may be infeasible (check it with --workload W)"
        else:
            verdict = "within the limit even at the peak"
        lines = [f"# power density from the clock and size alone: at least {floor:.3g} W/mm^2 (leakage), at most "
                 f"~{peak:.3g} W/mm^2 (upper estimate: every PE busy each cycle, {bounds['peak_power_w']:.3g} W on "
                 f"{bounds['area_mm2']:.3g} mm^2); {verdict} ({limit})"]
    if "workload" not in density:
        return lines + ["# power density on a workload: not checked (it needs one: --workload W)"]
    if not density["checked"]:
        return lines + [f"# power density on {density['workload']}: not checked, the design is infeasible there: "
                        f"{density['reason']}"]
    verdict = "OVER the limit: infeasible" if density["over"] else "within the limit"
    return lines + [f"# power density on {density['workload']}: {density['power_density_w_mm2']:.3g} W/mm^2 "
                    f"({density['on_die_power_w']:.3g} W on die), {verdict} ({limit})"]


def _presets(args: argparse.Namespace) -> int:
    configs = {name: load_preset(name) for name in preset_names()}
    if args.json:
        emit_json({name: c.to_dict() for name, c in configs.items()})
        return 0
    rows = [
        [name, f"{c.rows}x{c.cols}", c.dataflow.value, c.input_bits, c.ifmap_sram_kib + c.weight_sram_kib
         + c.ofmap_sram_kib, c.vector_lanes or "-", c.clock_mhz, c.tech_nm, memory_label(c.dram), c.config_hash]
        for name, c in configs.items()
    ]
    emit(format_table(["preset", "array", "dataflow", "bits", "sram_kib", "vector lanes", "mhz", "nm", "dram", "hash"],
                      rows))
    return 0
