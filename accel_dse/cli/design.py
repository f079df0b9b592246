"""``accel-dse design check FILE|PRESET`` and ``accel-dse design presets``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from accel_dse.cli._output import emit, emit_json, format_table
from accel_dse.design_files import load_design, load_preset, preset_names
from accel_spec.config import MEMORY_KINDS, NO_MEMORY, ArrayConfig
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
    for line in _memory_and_node_lines(config) + [_density_line(density)]:
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
    """Which DRAM part and node the design has, saying when it is the default (``dram = "none"``
    prices DDR3 at any clock: ``docs/physical.md``)."""
    from perf_model.physical.energy import DEFAULT_ENERGY

    defaults = {f.name: f.default for f in dataclasses.fields(ArrayConfig)}
    said = " (the default)" if config.dram == defaults["dram"] else ""
    if config.dram == NO_MEMORY:
        memory = (f'# dram = "{NO_MEMORY}"{said}: no part named; '
                  f"bandwidth {config.dram_bytes_per_cycle:g} B/cycle at any clock, energy "
                  f"{DEFAULT_ENERGY.dram_pj_per_byte / 8:.1f} pJ/bit (DDR3, Horowitz ISSCC 2014)")
    else:
        part = MEMORY_KINDS[config.dram]
        memory = f'# dram = "{part.name}"{said}: {part.gb_per_s:g} GB/s, {part.pj_per_bit:g} pJ/bit ({part.source})'
    node = f"# tech_nm = {config.tech_nm}{' (the default)' if config.tech_nm == defaults['tech_nm'] else ''}"
    return [memory, node]


def _power_density(config: ArrayConfig, workload: str | None) -> dict[str, Any]:
    """The design's on-die power density on ``workload`` against its ``max_power_density_w_mm2``
    (``{"checked": False}`` without a workload). The density is the model's with the limit lifted,
    so a design over its limit still shows by how much."""
    limit = config.max_power_density_w_mm2
    if workload is None:
        return {"checked": False, "limit_w_mm2": limit}
    import perf_model
    import workloads

    result = perf_model.evaluate(dataclasses.replace(config, max_power_density_w_mm2=1e6), workloads.resolve(workload))
    if result.status != "ok":
        return {"checked": False, "limit_w_mm2": limit, "workload": workload, "reason": result.reason}
    density = float(result.total["power_density_w_mm2"])
    return {"checked": True, "limit_w_mm2": limit, "workload": workload, "power_density_w_mm2": density,
            "on_die_power_w": float(result.total["on_die_power_w"]), "over": density > limit}


def _density_line(density: dict[str, Any]) -> str:
    """One line: the power density against the limit, or why it was not checked."""
    limit = f"max_power_density_w_mm2 = {density['limit_w_mm2']:g}"
    if "workload" not in density:
        return f"# power density: not checked (it needs a workload: --workload W); {limit}"
    if not density["checked"]:
        return f"# power density on {density['workload']}: not checked, the design is infeasible there: " \
               f"{density['reason']}"
    verdict = "OVER the limit: infeasible" if density["over"] else "within the limit"
    return (f"# power density on {density['workload']}: {density['power_density_w_mm2']:.3g} W/mm^2 "
            f"({density['on_die_power_w']:.3g} W on die), {verdict} ({limit})")


def _presets(args: argparse.Namespace) -> int:
    configs = {name: load_preset(name) for name in preset_names()}
    if args.json:
        emit_json({name: c.to_dict() for name, c in configs.items()})
        return 0
    rows = [
        [name, f"{c.rows}x{c.cols}", c.dataflow.value, c.input_bits, c.ifmap_sram_kib + c.weight_sram_kib
         + c.ofmap_sram_kib, c.vector_lanes or "-", c.clock_mhz, c.tech_nm, c.config_hash]
        for name, c in configs.items()
    ]
    emit(format_table(["preset", "array", "dataflow", "bits", "sram_kib", "vector lanes", "mhz", "nm", "hash"], rows))
    return 0
