"""Pod spaces: a space file's ``[llm]``, ``[system]`` and ``[split]`` tables.

With an ``[llm]`` table a space co-designs the chip (its ``[params]``), the system it sits in
and the split of an LLM job over the system's chips; trials are scored by ``perf_model.pod``::

    objectives = ["step_time", "area"]
    constraints = ["tokens_per_s >= 2e5", "hbm_used_gib <= 24"]

    [llm]                          # the job (accel_dse.pod_files.LLM_KEYS)
    model = "llama70b"
    mode = "train"
    batch = 256
    seq = 2048

    [system]                       # SystemConfig fields; numeric ones may vary
    preset = "tpu-v4-pod"          # start from a system preset (its chip is ignored)
    dims = [8, 8, 8]
    hbm_gib = [16.0, 32.0]
    link_gb_per_s = { low = 25.0, high = 100.0, scale = "log" }

    [split]                        # optional: without it each trial searches the split
    tp = [1, 2, 4, 8]
    pp = [1, 2, 4]
    zero = [1, 3]
    selective = [false, true]      # the splits people use are axes too
    interleave = [1, 2]

``system.*`` parameters: :data:`SYSTEM_AXES` (a value, choices or a range); ``topology``,
``dims``, ``wraparound``, ``name``, ``dcn_rings`` and the shared cache (``l2_mib``,
``l2_gb_per_s``) are fixed (the preset's unless the table gives them). ``split.*`` parameters:
:data:`SPLIT_AXES` (``dp`` is the chips over ``tp * pp``; ``overlap`` is fixed), the splits people
use included: ``selective = [false, true]``, ``sequence_parallel``, ``interleave = [1, 2, 4]``,
``capacity_factor``, ``zero_gather``. The metrics are
:data:`~accel_dse.search.space.metrics.SYSTEM_METRIC_UNITS` and the chip's ``area_mm2``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from accel_dse.search.space.design_space import SPLIT_PREFIX, SYSTEM_PREFIX, Param, PodTarget
from accel_dse.search.space.metrics import SYSTEM_METRIC_UNITS, Constraint, Objective
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError
from accel_spec.pod_config import SYSTEM_FIELDS, Split, SystemConfig

__all__ = ["parse_pod_tables", "check_pod_metrics", "SYSTEM_AXES", "SPLIT_AXES", "build_system", "build_split"]

#: System fields a pod space may vary, and whether they are integers.
SYSTEM_AXES: dict[str, str] = {"cores": "int", "link_gb_per_s": "float", "link_latency_us": "float",
                               "hbm_gib": "float", "pods": "int", "dcn_gb_per_s": "float", "dcn_latency_us": "float"}
_SYSTEM_FIXED = ("topology", "dims", "wraparound", "name", "dcn_rings", "l2_mib", "l2_gb_per_s")
#: Split fields a pod space may vary, and their kinds (``dp`` follows from the chips; ``overlap`` is fixed).
SPLIT_AXES: dict[str, str] = {"tp": "int", "pp": "int", "ep": "int", "zero": "int", "microbatch": "int",
                              "recompute": "float", "selective": "bool", "sequence_parallel": "bool",
                              "interleave": "int", "capacity_factor": "float", "zero_gather": "str"}
_BASE_CHIP = ArrayConfig(rows=1, cols=1)


def _check_system(field: str, value: object, where: str) -> Any:
    name = field.removeprefix(SYSTEM_PREFIX)
    if SYSTEM_AXES[name] == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    try:
        fields: dict[str, Any] = {"topology": "ring", "dims": (1,), "dcn_gb_per_s": 1.0, name: value}
        SystemConfig(chip=_BASE_CHIP, **fields)
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return value


def _check_split(field: str, value: object, where: str) -> Any:
    name = field.removeprefix(SPLIT_PREFIX)
    if SPLIT_AXES[name] == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    try:
        fields: dict[str, Any] = {name: value}
        if name == "interleave":  # checked as a pipeline would take it (with pp = 1 a trial is refused)
            fields["pp"] = 2
        Split(**fields)
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return value


def parse_pod_tables(doc: Mapping[str, Any], source: str,
                     parse_param: Callable[..., Param]) -> tuple[PodTarget | None, tuple[Param, ...]]:
    """The pod target and its ``system.*`` / ``split.*`` parameters, or ``(None, ())`` without ``[llm]``."""
    from accel_dse.pod_files import llm_job_from_table, load_system

    if "llm" not in doc:
        for key in ("system", "split"):
            if key in doc:
                raise ConfigError(f"{source}: a [{key}] table needs an [llm] job (model, mode, batch, seq)")
        return None, ()
    llm = doc["llm"]
    llm_job_from_table(llm, where=f"{source}: [llm]")
    table = doc.get("system")
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: a space with an [llm] job needs a [system] table (preset = 'tpu-v4-pod', "
                          f"dims, link_gb_per_s, hbm_gib, ...), not {table!r}")
    table = dict(table)
    base: dict[str, Any] = {}
    if "preset" in table:
        preset = table.pop("preset")
        if not isinstance(preset, str):
            raise ConfigError(f"{source}: system.preset must be a system preset name, not {preset!r}")
        system, _ = load_system(preset)
        base = {f: getattr(system, f) for f in SYSTEM_FIELDS}
    for key in table:
        if key not in SYSTEM_AXES and key not in _SYSTEM_FIXED:
            raise ConfigError(f"{source}: unknown key {key!r} in [system] (known: preset, "
                              f"{', '.join((*_SYSTEM_FIXED, *SYSTEM_AXES))})")
    fixed: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in {**base, **table}.items()
                             if k in _SYSTEM_FIXED}
    try:
        SystemConfig(chip=_BASE_CHIP, **fixed)
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{source}: [system]: {exc}") from None
    params = []
    defaults = {f.name: f.default for f in dataclasses.fields(SystemConfig)}
    for name, kind in SYSTEM_AXES.items():
        spec = table.get(name, base.get(name, defaults[name]))
        params.append(parse_param(f"{SYSTEM_PREFIX}{name}", spec, f"{source}: system.{name}", _check_system, kind))
    split = doc.get("split")
    overlap = True
    if split is not None:
        if not isinstance(split, dict):
            raise ConfigError(f"{source}: split must be a table of tp, pp, ep, zero, microbatch, recompute, "
                              f"overlap, not {split!r}")
        for key in split:
            if key not in SPLIT_AXES and key != "overlap":
                raise ConfigError(f"{source}: unknown key {key!r} in [split] (known: {', '.join(SPLIT_AXES)}, "
                                  "overlap; dp is what the chips leave)")
        overlap = split.get("overlap", True)
        if not isinstance(overlap, bool):
            raise ConfigError(f"{source}: split.overlap must be true or false, not {overlap!r}")
        split_defaults = {f.name: f.default for f in dataclasses.fields(Split)}
        for name, kind in SPLIT_AXES.items():
            params.append(parse_param(f"{SPLIT_PREFIX}{name}", split.get(name, split_defaults[name]),
                                      f"{source}: split.{name}", _check_split,
                                      kind if kind in ("int", "float") else ""))
    target = PodTarget(llm=tuple(sorted(llm.items())), system=tuple(sorted(fixed.items())),
                       split_searched=split is None, overlap=overlap)
    return target, tuple(params)


def check_pod_metrics(pod: bool, objectives: tuple[Objective, ...], constraints: tuple[Constraint, ...],
                      source: str) -> None:
    """A pod space optimises and bounds the system's metrics and ``area_mm2``; a chip space the chip's."""
    for name, metric in [(o.name, o.metric) for o in objectives] + [(str(c), c.metric) for c in constraints]:
        system = metric in SYSTEM_METRIC_UNITS
        if pod and not system and metric != "area_mm2":
            raise ConfigError(f"{source}: {name!r} is a single-chip figure; a space with an [llm] job has "
                              f"{', '.join(SYSTEM_METRIC_UNITS)} and area_mm2")
        if not pod and system:
            raise ConfigError(f"{source}: {name!r} needs an [llm] job (a system metric)")


def build_system(chip: ArrayConfig, target: PodTarget, choice: Mapping[str, Any]) -> SystemConfig:
    """The system of one trial: the target's fixed fields and the chosen ``system.*`` values."""
    values = {k.removeprefix(SYSTEM_PREFIX): v for k, v in choice.items() if k.startswith(SYSTEM_PREFIX)}
    return SystemConfig(chip=chip, **dict(target.system), **values)


def build_split(system: SystemConfig, target: PodTarget, choice: Mapping[str, Any]) -> Split | str | None:
    """The split of one trial (``None``: searched), or why the chosen values cannot make one."""
    if target.split_searched:
        return None
    values = {k.removeprefix(SPLIT_PREFIX): v for k, v in choice.items() if k.startswith(SPLIT_PREFIX)}
    tp, pp = values.get("tp", 1), values.get("pp", 1)
    if system.chips % (tp * pp):
        return f"tp * pp = {tp * pp} must divide the system's {system.chips} chips"
    try:
        return Split(dp=system.chips // (tp * pp), overlap=target.overlap, **values)
    except ConfigError as exc:
        return str(exc)
