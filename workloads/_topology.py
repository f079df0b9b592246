"""Layer tables of other tools: SCALE-Sim topology CSVs and Timeloop problem YAML (no JAX).

SCALE-Sim (v2) topology CSV, one layer a row after a header row; fields are comma-separated,
blank lines are skipped and an empty or ``#``-comment field at the end of a row is ignored:

* conv form: ``name, ifmap height, ifmap width, filter height, filter width, channels,
  num filters, stride`` (one stride for both axes, or ``stride height, stride width``). No
  padding, as SCALE-Sim computes ``out = (in - filter) // stride + 1``. A layer whose name
  contains ``DP`` is depthwise, as in SCALE-Sim: ``channels`` groups of ``num filters`` each.
* GEMM form (header ``name, M, N, K``): ``C[M, N] = A[M, K] @ B[K, N]``.

Timeloop problem YAML (``problem: {shape: ..., instance: ...}``, or the instance alone):

* the CNN-layer shape (dims ``C M R S N P Q``, optional ``G`` groups, coefficients
  ``Hstride Wstride Hdilation Wdilation``): ``P``/``Q`` are the output width/height and
  ``R``/``S`` the filter width/height (Timeloop's projections ``R*Wdilation + P*Wstride``);
  the input is the unpadded ``(Q-1)*Hstride + (S-1)*Hdilation + 1`` high. With ``G``,
  ``C`` and ``M`` are per group;
* a GEMM shape with dims ``M N K``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accel_spec.errors import WorkloadError
from accel_spec.text import INT_RULE, parse_int, shown
from workloads._op_limits import check_op_count
from workloads.ops import Conv2d, Gemm, Op, Workload

__all__ = ["load_scalesim_csv", "load_timeloop_yaml"]

_CONV_FIELDS = ("ifmap height", "ifmap width", "filter height", "filter width", "channels", "num filters")


def _fields(line: str) -> list[str]:
    parts = [p.strip() for p in line.split(",")]
    while parts and (not parts[-1] or parts[-1].startswith("#")):
        parts.pop()
    return parts


def _int(text: str, field: str, where: str) -> int:
    value = parse_int(text)
    if value is None:
        raise WorkloadError(f"{where}: {field} must be a positive integer, not {shown(repr(text))} ({INT_RULE})")
    if value < 1:
        raise WorkloadError(f"{where}: {field} must be a positive integer, not {value}")
    return value


def _csv_op(parts: list[str], gemm_form: bool, where: str, origin: str) -> Op:
    name = parts[0]
    numbers = parts[1:]
    if gemm_form:
        if len(numbers) != 3:
            raise WorkloadError(f"{where}: a GEMM row must be name, M, N, K (3 numbers), not {len(numbers)}")
        m, n, k = (_int(v, f, where) for v, f in zip(numbers, ("M", "N", "K"), strict=True))
        try:
            return Gemm(m=m, k=k, n=n, name=name, origin=origin)
        except WorkloadError as exc:
            raise WorkloadError(f"{where}: {exc}") from None
    if len(numbers) not in (7, 8):
        raise WorkloadError(f"{where}: a conv row must be name, ifmap height, ifmap width, filter height, filter "
                            f"width, channels, num filters, stride[, stride width] (7 or 8 numbers), "
                            f"not {len(numbers)}")
    strides = ("stride height", "stride width") if len(numbers) == 8 else ("stride",)
    h, w, kh, kw, c, f, *st = (_int(v, fld, where) for v, fld in zip(numbers, (*_CONV_FIELDS, *strides),
                                                                       strict=True))
    sh, sw = (st[0], st[0]) if len(st) == 1 else (st[0], st[1])
    groups = c if "DP" in name else 1
    try:
        return Conv2d(n=1, h=h, w=w, c_in=c, c_out=c * f if groups > 1 else f, kh=kh, kw=kw, stride_h=sh,
                      stride_w=sw, groups=groups, name=name, origin=origin)
    except WorkloadError as exc:
        raise WorkloadError(f"{where}: {exc}") from None


def load_scalesim_csv(text: str, *, name: str, what: str) -> Workload:
    """A :class:`Workload` from a SCALE-Sim topology CSV (conv or GEMM form, see the module docstring).

    Raises:
        WorkloadError: a bad row (its line number and the rule), or no layer rows.
    """
    lines = text.splitlines()
    header_at = next((i for i, ln in enumerate(lines) if _fields(ln)), None)
    if header_at is None:
        raise WorkloadError(f"{what} is empty: a SCALE-Sim topology needs a header row and layer rows")
    header = [h.lower() for h in _fields(lines[header_at])]
    gemm_form = header[1:4] == ["m", "n", "k"]
    check_op_count(sum(1 for line in lines[header_at + 1:] if _fields(line)), what, "layer rows")
    ops: list[Op] = []
    for number, line in enumerate(lines[header_at + 1:], start=header_at + 2):
        parts = _fields(line)
        if not parts:
            continue
        ops.append(_csv_op(parts, gemm_form, f"{what} line {number}", f"{what}:{number}"))
    if not ops:
        raise WorkloadError(f"{what} has a header but no layer rows")
    form = "GEMM" if gemm_form else "conv"
    return Workload(name=name, ops=tuple(ops), description=f"SCALE-Sim {form} topology {what}", source="scalesim")


class _AliasRefused(Exception):
    """A YAML alias (``*name``), refused: aliases can expand a small file into gigabytes."""

    def __init__(self, anchor: str, line: int) -> None:
        super().__init__(anchor)
        self.anchor, self.line = anchor, line


def _safe_yaml(text: str, what: str) -> Any:
    """``text`` loaded as YAML with the safe loader, aliases refused (anchors alone are harmless)."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise _AliasRefused(event.anchor, event.start_mark.line + 1)
            return super().compose_node(parent, index)

    try:
        return yaml.load(text, Loader=NoAliasLoader)  # noqa: S506  # a SafeLoader subclass
    except _AliasRefused as exc:
        raise WorkloadError(f"{what} line {exc.line}: YAML alias *{shown(exc.anchor, 40)} is not read (aliases can "
                            "expand a small file into gigabytes); write the value out") from None
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{what} is not YAML: {shown(str(exc).splitlines()[0])}") from None


def _kind(value: object) -> str:
    """How an error names a YAML value it did not expect: ``an int (5)``, ``a list``, ..."""
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if value is None:
        return "empty"
    return f"{type(value).__name__} {shown(repr(value), 40)}"  # a scalar: its type and value


def _instance_int(instance: Mapping[str, Any], key: str, default: int | None, what: str) -> int:
    value = instance.get(key, default)
    if isinstance(value, str) and parse_int(value) is not None:
        value = parse_int(value)
    if value is None:
        raise WorkloadError(f"{what}: problem instance must set {key}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        bad = _kind(value) if isinstance(value, (list, dict)) else shown(repr(value), 40)
        raise WorkloadError(f"{what}: problem instance {key} must be a positive integer, not {bad}")
    return value


def _dimensions(shape: Mapping[str, Any], instance: Mapping[str, Any], what: str) -> set[str]:
    """The names in ``problem.shape.dimensions`` (a flat list of names), else the instance's keys."""
    given = shape.get("dimensions")
    if given is None:
        return {str(k) for k in instance}
    if not isinstance(given, list):
        raise WorkloadError(f"{what}: problem.shape.dimensions must be a flat list of dimension names, "
                            f"not {_kind(given)}")
    for i, item in enumerate(given):
        if not isinstance(item, str):
            raise WorkloadError(f"{what}: problem.shape.dimensions must be a flat list of dimension names; "
                                f"item {i} is {_kind(item)}")
    return set(given)


def _mapping(value: object, field: str, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise WorkloadError(f"{what}: {field} must be a mapping (key: value lines), not {_kind(value)}")
    return value


def _timeloop_op(dims: set[str], instance: Mapping[str, Any], layer: str, what: str) -> Op:
    """The op of a Timeloop problem: a CNN layer (dims ``C M R S N P Q`` [``G``]) or a GEMM (``M N K``)."""
    if {"C", "M", "R", "S", "P", "Q"} <= dims:
        get = {k: _instance_int(instance, k, 1 if k in ("N", "G") else None, what)
               for k in ("C", "M", "R", "S", "N", "P", "Q", "G")}
        coeff = {k: _instance_int(instance, k, 1, what) for k in ("Hstride", "Wstride", "Hdilation", "Wdilation")}
        h = (get["Q"] - 1) * coeff["Hstride"] + (get["S"] - 1) * coeff["Hdilation"] + 1
        w = (get["P"] - 1) * coeff["Wstride"] + (get["R"] - 1) * coeff["Wdilation"] + 1
        return Conv2d(n=get["N"], h=h, w=w, c_in=get["C"] * get["G"], c_out=get["M"] * get["G"], kh=get["S"],
                      kw=get["R"], stride_h=coeff["Hstride"], stride_w=coeff["Wstride"],
                      dilation_h=coeff["Hdilation"], dilation_w=coeff["Wdilation"], groups=get["G"],
                      name=layer, origin=f"{what}: problem.instance")
    if dims == {"M", "N", "K"}:
        m, n, k = (_instance_int(instance, d, None, what) for d in ("M", "N", "K"))
        return Gemm(m=m, k=k, n=n, name=layer, origin=f"{what}: problem.instance")
    raise WorkloadError(f"{what}: problem dimensions {shown(sorted(dims))} are neither a CNN layer (C M R S N P Q) "
                        "nor a GEMM (M N K)")


def load_timeloop_yaml(text: str, *, name: str, what: str) -> Workload:
    """A :class:`Workload` of one layer from a Timeloop problem file (CNN-layer or GEMM shape).

    Raises:
        WorkloadError: not YAML, a YAML alias, no ``instance``, a field of the wrong kind (naming
            the field and the rule), a shape that is neither, or a bad value.
    """
    doc = _safe_yaml(text, what)
    problem = doc.get("problem", doc) if isinstance(doc, dict) else None
    instance = problem.get("instance") if isinstance(problem, dict) else None
    if not isinstance(problem, dict) or instance is None:
        raise WorkloadError(f"{what} is not a Timeloop problem: it needs problem: instance: {{C: ..., M: ...}}")
    instance = _mapping(instance, "problem.instance", what)
    shape = _mapping(problem.get("shape") or {}, "problem.shape", what)
    dims = _dimensions(shape, instance, what)
    label = shape.get("name", "layer")
    if isinstance(label, (list, dict)):
        raise WorkloadError(f"{what}: problem.shape.name must be a name, not {_kind(label)}")
    layer = str(label or "layer")
    try:
        op = _timeloop_op(dims, instance, layer, what)
    except WorkloadError as exc:  # an op record's own rule (a size beyond 2**48 MACs, ...): name the file
        text = str(exc)
        raise WorkloadError(text if text.startswith(what) else f"{what}: problem.instance: {text}") from None
    return Workload(name=name, ops=(op,), description=f"Timeloop problem {what}", source="timeloop")
