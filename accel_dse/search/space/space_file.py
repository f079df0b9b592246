"""Design-space files (TOML): parse -> validate -> build a :class:`DesignSpace`.

A space file names the workloads (with weights), the objectives, the constraints, and for
each :class:`~accel_spec.config.ArrayConfig` field either a fixed value, a list of choices or a
range::

    name = "edge-int8"
    objectives = ["edp"]                       # one = single objective, several = Pareto
    constraints = ["area_mm2 <= 4", "power_w <= 2"]

    [[workloads]]
    spec = "resnet18"                          # anything workloads.resolve() accepts
    weight = 1.0

    [params]
    rows = { low = 4, high = 128, scale = "pow2" }     # 4, 8, ..., 128
    cols = { low = 4, high = 128, scale = "pow2" }
    dataflow = ["ws", "os", "is"]                      # choices (unordered)
    dram_bytes_per_cycle = [4.0, 8.0, 16.0, 32.0]      # numbers: ordered choices
    ifmap_sram_kib = { low = 16, high = 1024, scale = "log" }   # integers, log-uniform
    clock_mhz = { low = 400.0, high = 1000.0, step = 100.0 }
    input_bits = 8                                     # fixed

    [fpga]                                     # optional: an FPGA target
    family = "ecp5"                            # the families perf_model's resource model covers
    device = "85k"
    fit = true                                 # default: adds "fpga_utilization <= 1"

With an ``[fpga]`` table the sweep also reports the FPGA metrics of that device
(:data:`~accel_dse.search.space.metrics.FPGA_METRIC_UNITS`: ``luts``, ``ffs``, ``dsps``, ``brams``,
``fmax_mhz``, ``fpga_utilization``) and constraints may bound them (``"dsps <= 156"``,
``"fmax_mhz >= 40"``); without one, a constraint on them is an error.

Fields left out take the ``ArrayConfig`` default (``rows`` and ``cols`` have none: set them).
Every error is one :class:`~accel_spec.errors.ConfigError` naming the file, the key, the rule
and the bad value; a :class:`DesignSpace` that exists is valid.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeGuard

from accel_dse.design_files import parse_toml, read_toml
from accel_dse.search.space.design_space import (
    _FLOAT_FIELDS,
    DesignSpace,
    FpgaTarget,
    Param,
    WorkloadSpec,
    _is_number,
    _jsonable,
)
from accel_dse.search.space.metrics import FPGA_METRIC_UNITS, Constraint, Objective, parse_constraint, parse_objective
from accel_dse.search.space.pod_space import check_pod_metrics, parse_pod_tables
from accel_spec.config import FIELD_NAMES, ArrayConfig
from accel_spec.errors import AccelDseError, ConfigError
from accel_spec.number_formats import FORMATS

__all__ = ["load_space", "parse_space", "space_names"]

_INT_FIELDS = ("rows", "cols", "input_bits", "acc_bits", "ifmap_sram_kib", "weight_sram_kib",
               "ofmap_sram_kib", "tech_nm")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TOP_KEYS = ("name", "description", "objectives", "constraints", "workloads", "params", "fpga", "llm", "system",
             "split")
_FPGA_KEYS = ("family", "device", "fit")
_RANGE_KEYS = ("low", "high", "step", "scale")
_SCALES = ("linear", "log", "pow2")
#: A complete, valid base design used to check one field value at a time.
_BASE = {"rows": 1, "cols": 1, "input_bits": 8, "acc_bits": 32}


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_pow2(value: object) -> bool:
    if not _is_number(value) or not float(value).is_integer() or value < 1:
        return False
    return (int(value) & (int(value) - 1)) == 0



def space_names() -> list[str]:
    """Names of the spaces shipped in ``accel_dse/spaces``, sorted."""
    folder = resources.files("accel_dse") / "spaces"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_space(spec: str | Path) -> DesignSpace:
    """Load a space from a file path or a shipped space name (``"edge-int8"``)."""
    text = str(spec)
    path = Path(text)
    if path.exists() or text.endswith(".toml") or "/" in text or "\\" in text:
        source = f"space file {text!r}"
        return parse_space(read_toml(path, what="space file"), source=source, default_name=path.stem)
    if text in space_names():
        body = (resources.files("accel_dse") / "spaces" / f"{text}.toml").read_text("utf-8")
        source = f"space {text!r}"
        return parse_space(parse_toml(body, source=source), source=source, default_name=text)
    raise ConfigError(
        f"space {text!r} is neither a space file nor a shipped space (spaces: {', '.join(space_names())})"
    )


def parse_space(doc: Mapping[str, Any], *, source: str = "space", default_name: str = "space") -> DesignSpace:
    """Validate a parsed space document and build the :class:`DesignSpace`."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{source} must be a table, not {doc!r}")
    for key in doc:
        if key not in _TOP_KEYS:
            raise ConfigError(f"{source}: unknown key {key!r}{_hint(key, _TOP_KEYS)}")
    name = doc.get("name", default_name)
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"{source}: name must be letters, digits, '.', '_' or '-' (starting with a letter or digit), "
            f"not {name!r}"
        )
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{source}: description must be a string, not {description!r}")
    fpga, fit = _parse_fpga(doc.get("fpga"), source)
    constraints = _parse_constraints(doc.get("constraints", []), source)
    objectives = _parse_objectives(doc.get("objectives"), source)
    pod, pod_params = parse_pod_tables(doc, source, _parse_param)
    check_pod_metrics(pod is not None, objectives, constraints, source)
    if fpga is None:
        for c in constraints:
            if c.metric in FPGA_METRIC_UNITS:
                raise ConfigError(f"{source}: constraint '{c}' bounds an FPGA metric: name the device in an "
                                  "[fpga] table (family = \"ecp5\", device = \"85k\")")
    elif fit and not any(c.metric == "fpga_utilization" for c in constraints):
        constraints += (Constraint(metric="fpga_utilization", op="<=", bound=1.0),)
    if pod is not None and "workloads" in doc:
        raise ConfigError(f"{source}: a space with an [llm] job takes no [[workloads]] (the job is the workload)")
    if pod is not None and fpga is not None:
        raise ConfigError(f"{source}: a space with an [llm] job takes no [fpga] target")
    return DesignSpace(
        name=name,
        description=description,
        params=_parse_params(doc.get("params"), source) + pod_params,
        workloads=() if pod is not None else _parse_workloads(doc.get("workloads"), source),
        objectives=objectives,
        constraints=constraints,
        source=source,
        fpga=fpga,
        pod=pod,
    )


def _hint(key: object, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(key), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"


def _parse_objectives(value: object, source: str) -> tuple[Objective, ...]:
    if value is None:
        raise ConfigError(f"{source}: 'objectives' is missing (a list such as [\"edp\"] or [\"latency\", \"area\"])")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{source}: objectives must be a non-empty list of names, not {value!r}")
    objectives = tuple(parse_objective(v, where=source) for v in items)
    names = [o.name for o in objectives]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: objectives must not repeat a name, not {names!r}")
    return objectives


def _parse_constraints(value: object, source: str) -> tuple[Constraint, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise ConfigError(f"{source}: constraints must be a list of strings like 'area_mm2 <= 50', not {value!r}")
    return tuple(parse_constraint(c, where=source) for c in items)


def _parse_fpga(value: object, source: str) -> tuple[FpgaTarget | None, bool]:
    """The ``[fpga]`` table: ``(target, fit)``; ``(None, False)`` when there is none."""
    if value is None:
        return None, False
    where = f"{source}: fpga"
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table with family and device, not {value!r}")
    for key in value:
        if key not in _FPGA_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r}{_hint(key, _FPGA_KEYS)}")
    from perf_model import FPGA_DEVICES, fpga_device

    family = value.get("family", "ecp5")
    device = value.get("device")
    key = "device" if isinstance(family, str) and family in FPGA_DEVICES else "family"
    if device is None and key == "device":
        raise ConfigError(f"{where}: 'device' is missing (one of {', '.join(FPGA_DEVICES[family])})")
    try:
        fpga_device(family, device)  # type: ignore[arg-type]  # checks the types and names, raises if bad
    except AccelDseError as exc:
        raise ConfigError(f"{where}.{key}: {exc}") from None
    fit = value.get("fit", True)
    if not isinstance(fit, bool):
        raise ConfigError(f"{where}: fit must be true or false, not {fit!r}")
    return FpgaTarget(family=str(family), device=str(device)), fit


def _parse_workloads(value: object, source: str) -> tuple[WorkloadSpec, ...]:
    if value is None:
        raise ConfigError(f"{source}: 'workloads' is missing (e.g. [[workloads]] spec = \"resnet18\")")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{source}: workloads must be a non-empty list, not {value!r}")
    specs: list[WorkloadSpec] = []
    for i, item in enumerate(value):
        where = f"{source}: workloads[{i}]"
        if isinstance(item, str):
            item = {"spec": item}
        if not isinstance(item, dict):
            raise ConfigError(f"{where} must be a workload name or a table with spec and weight, not {item!r}")
        for key in item:
            if key not in ("spec", "weight"):
                raise ConfigError(f"{where}: unknown key {key!r}{_hint(key, ('spec', 'weight'))}")
        spec = item.get("spec")
        if not isinstance(spec, str) or not spec.strip():
            raise ConfigError(f"{where}: spec must be a non-empty workload name, not {spec!r}")
        weight = item.get("weight", 1.0)
        if not _is_number(weight) or not math.isfinite(weight) or weight <= 0:
            raise ConfigError(f"{where}: weight must be a positive finite number, not {weight!r}")
        specs.append(WorkloadSpec(spec=spec.strip(), weight=float(weight)))
    seen = [s.spec for s in specs]
    for s in seen:
        if seen.count(s) > 1:
            raise ConfigError(f"{source}: workloads must not repeat a spec, not {s!r} twice")
    return tuple(specs)


def _parse_params(value: object, source: str) -> tuple[Param, ...]:
    if value is None:
        raise ConfigError(f"{source}: [params] is missing (rows and cols at least)")
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: params must be a table of ArrayConfig fields, not {value!r}")
    for key in value:
        if key not in FIELD_NAMES:
            raise ConfigError(f"{source}: unknown field {key!r} in [params]{_hint(key, FIELD_NAMES)}")
    for required in ("rows", "cols"):
        if required not in value:
            raise ConfigError(f"{source}: [params] must set {required!r} (it has no default)")
    defaults = {f.name: f.default for f in dataclasses.fields(ArrayConfig)}
    params = []
    for field in FIELD_NAMES:
        where = f"{source}: params.{field}"
        if field not in value:
            params.append(Param(field=field, kind="fixed", values=(_jsonable(defaults[field]),)))
            continue
        params.append(_parse_param(field, value[field], where))
    return tuple(params)


def _check_value(field: str, value: object, where: str) -> Any:
    """Check one value of ``field`` on its own; return it normalised (floats for float fields)."""
    if field in _FLOAT_FIELDS and _is_int(value):
        value = float(value)
    base: dict[str, Any] = dict(_BASE)
    if field == "input_bits":
        base["acc_bits"] = 64
    base[field] = value
    if field in ("weight_format", "act_format"):  # checked alone; kept as spelt ("int8" is not "auto")
        base["act_format" if field == "weight_format" else "weight_format"] = "int8" if value == "int16" else value
        fmt = FORMATS.get(str(value))
        base["acc_bits"] = 32 if fmt is not None and fmt.accumulator == "fp32" else 64  # the format's accumulator
    try:
        config = ArrayConfig(**base)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return value if field in ("weight_format", "act_format") else _jsonable(getattr(config, field))


#: Checks one value of a field on its own and returns it normalised (``_check_value`` for the chip's).
Check = Callable[[str, object, str], Any]


def _parse_param(field: str, spec: object, where: str, check: Check | None = None, numeric: str = "") -> Param:
    """One parameter: a fixed value, a list of choices or a range. ``check`` validates a value
    (default: as an ``ArrayConfig`` field); ``numeric`` (``"int"`` or ``"float"``) lets a field that
    is not the chip's take a range."""
    check = check or _check_value
    if isinstance(spec, list) or (isinstance(spec, dict) and "values" in spec):
        if isinstance(spec, dict):
            extra = [k for k in spec if k != "values"]
            if extra:
                raise ConfigError(f"{where}: a choice table holds only 'values', not {extra[0]!r}")
            spec = spec["values"]
        if not isinstance(spec, list) or not spec:
            raise ConfigError(f"{where}: the list of choices must not be empty")
        values = tuple(check(field, v, where) for v in spec)
        if len(set(values)) != len(values):
            raise ConfigError(f"{where}: choices must not repeat a value, not {list(values)!r}")
        if len(values) == 1:
            return Param(field=field, kind="fixed", values=values)
        if all(_is_number(v) for v in values):
            # Numbers are ordered: searched by position so model-based samplers see neighbours.
            return Param(field=field, kind="ordered", values=values)
        return Param(field=field, kind="choice", values=values)
    if isinstance(spec, dict):
        return _parse_range(field, spec, where, check, numeric)
    return Param(field=field, kind="fixed", values=(check(field, spec, where),))


def _parse_range(field: str, spec: dict[str, Any], where: str, check: Check, numeric: str = "") -> Param:
    for key in spec:
        if key not in _RANGE_KEYS:
            raise ConfigError(f"{where}: unknown range key {key!r}{_hint(key, _RANGE_KEYS + ('values',))}")
    if not numeric and field not in _INT_FIELDS and field not in _FLOAT_FIELDS:
        raise ConfigError(f"{where}: {field} takes a value or a list of choices, not a range")
    for key in ("low", "high"):
        if key not in spec:
            raise ConfigError(f"{where}: a range needs 'low' and 'high', {key!r} is missing")
    scale = spec.get("scale", "linear")
    if scale not in _SCALES:
        raise ConfigError(f"{where}: scale must be one of {', '.join(_SCALES)}, not {scale!r}")
    is_int = numeric == "int" or (not numeric and field in _INT_FIELDS)
    low, high, step = spec["low"], spec["high"], spec.get("step")
    for key, v in (("low", low), ("high", high)):
        ok = _is_int(v) if is_int else (_is_number(v) and math.isfinite(v))
        if not ok:
            kind = "an integer" if is_int else "a finite number"
            raise ConfigError(f"{where}: {key} must be {kind}, not {v!r}")
    if low > high:
        raise ConfigError(f"{where}: low must be <= high, not low={low!r} > high={high!r}")
    check(field, low, where)
    check(field, high, where)
    if scale == "pow2":
        if step is not None:
            raise ConfigError(f"{where}: a pow2 range takes no step, not step={step!r}")
        for key, v in (("low", low), ("high", high)):
            if not _is_pow2(v):
                raise ConfigError(f"{where}: a pow2 range needs powers of two, not {key}={v!r}")
        return Param(field=field, kind="pow2", low=low, high=high)
    if scale == "log":
        if step is not None:
            raise ConfigError(f"{where}: a log range takes no step, not step={step!r}")
        return Param(field=field, kind="int" if is_int else "float", low=low, high=high, log=True)
    if step is not None:
        ok = (_is_int(step) if is_int else (_is_number(step) and math.isfinite(step))) and step > 0
        if not ok:
            kind = "a positive integer" if is_int else "a positive finite number"
            raise ConfigError(f"{where}: step must be {kind}, not {step!r}")
        spans = (high - low) / step
        if abs(spans - round(spans)) > 1e-9:
            raise ConfigError(
                f"{where}: high - low must be a multiple of step, not {high!r} - {low!r} with step {step!r}"
            )
    if is_int:
        return Param(field=field, kind="int", low=low, high=high, step=step if step is not None else None)
    return Param(field=field, kind="float", low=float(low), high=float(high),
                 step=float(step) if step is not None else None)
