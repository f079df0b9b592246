"""``DesignArrays``: many designs as a struct of numpy arrays, one element per design.

The vectorised model never touches per-design Python objects: a sweep builds the columns it
varies (``DesignArrays.from_columns(rows=..., cols=..., ...)``) and every other field takes the
``ArrayConfig`` default. Fields and units are exactly those of :class:`ArrayConfig`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from accel_spec.config import CHECKSUMS, FORMAT_CODES, INPUT_BITS, MEMORY_NAMES, ArrayConfig, Dataflow
from accel_spec.errors import ModelError
from perf_model import timing

__all__ = ["DesignArrays"]

_INT_FIELDS = (
    "rows", "cols", "input_bits", "acc_bits", "ifmap_sram_kib", "weight_sram_kib", "ofmap_sram_kib",
    "tech_nm",
)
_FLOAT_FIELDS = ("dram_bytes_per_cycle", "clock_mhz", "max_power_density_w_mm2")
_FIELDS = tuple(f.name for f in dataclasses.fields(ArrayConfig))
#: String fields kept as integer codes: the index of the value in its tuple of names.
_CODED = {"dram": MEMORY_NAMES, "weight_format": FORMAT_CODES, "act_format": FORMAT_CODES, "checksum": CHECKSUMS}
_CODE_TO_DATAFLOW = {code: Dataflow(name) for name, code in timing.DATAFLOW_CODES.items()}
# Same limits as ArrayConfig (accel_spec/config.py): (low, high) per integer field.
_LIMITS = {
    "rows": (1, 4096), "cols": (1, 4096), "ifmap_sram_kib": (1, 1 << 20),
    "weight_sram_kib": (1, 1 << 20), "ofmap_sram_kib": (1, 1 << 20), "tech_nm": (5, 180),
}


@dataclasses.dataclass(frozen=True, eq=False)
class DesignArrays:
    """Designs as parallel 1-D arrays (one element per design), fields named as in ``ArrayConfig``.

    Attributes:
        rows, cols: PE array rows R and columns C (int64).
        dataflow: dataflow codes of :data:`perf_model.timing.DATAFLOW_CODES` (int64: ws 0, os 1, is 2).
        input_bits, acc_bits: operand and accumulator widths in bits (int64).
        ifmap_sram_kib, weight_sram_kib, ofmap_sram_kib: buffer sizes in KiB (int64).
        dram_bytes_per_cycle: DRAM bandwidth in bytes per clock cycle (float64).
        clock_mhz: clock in MHz (float64).
        double_buffered: ping-pong buffers (bool).
        shadow_stationary: shadow stationary registers in the PEs (bool).
        vector_unit: the design carries the vector unit (bool; ``ArrayConfig.vector_unit``).
        tech_nm: technology node in nm (int64).
        dram: memory kind codes, the index in :data:`accel_spec.config.MEMORY_NAMES` (int64:
            ``none`` 0); ``from_columns`` also takes the names.
        checksum: checksum codes, the index in :data:`accel_spec.config.CHECKSUMS` (int64:
            ``none`` 0, ``detect`` 1); ``from_columns`` also takes the names.
        weight_format, act_format: operand format codes, the index in
            :data:`accel_spec.config.FORMAT_CODES` (int64: ``auto`` 0); names accepted too.
        pack_int4: int4 operands packed two a byte in DRAM (bool; ``ArrayConfig.pack_int4``).
        max_power_density_w_mm2: the design's power-density limit, W/mm^2 (float64;
            ``ArrayConfig.max_power_density_w_mm2``, ``perf_model.physical.power_density``).
    """

    rows: np.ndarray
    cols: np.ndarray
    dataflow: np.ndarray
    input_bits: np.ndarray
    acc_bits: np.ndarray
    ifmap_sram_kib: np.ndarray
    weight_sram_kib: np.ndarray
    ofmap_sram_kib: np.ndarray
    dram_bytes_per_cycle: np.ndarray
    clock_mhz: np.ndarray
    double_buffered: np.ndarray
    shadow_stationary: np.ndarray
    tech_nm: np.ndarray
    dram: np.ndarray
    checksum: np.ndarray
    weight_format: np.ndarray
    act_format: np.ndarray
    vector_unit: np.ndarray
    pack_int4: np.ndarray
    max_power_density_w_mm2: np.ndarray

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @classmethod
    def from_configs(cls, configs: Sequence[ArrayConfig]) -> DesignArrays:
        """Stack already-checked ``ArrayConfig`` objects into arrays."""
        configs = list(configs)
        for i, config in enumerate(configs):
            if not isinstance(config, ArrayConfig):
                raise ModelError(f"configs[{i}] must be an ArrayConfig, not {config!r}")
        columns: dict[str, Any] = {}
        for name in _FIELDS:
            values = [getattr(c, name) for c in configs]
            if name == "dataflow":
                values = [timing.dataflow_code(v) for v in values]
            elif name in _CODED:
                values = [_CODED[name].index(v) for v in values]
            columns[name] = values
        return cls._build(columns)

    @classmethod
    def from_columns(cls, **arrays: Any) -> DesignArrays:
        """Build from columns named like ``ArrayConfig`` fields; scalars and arrays broadcast.

        ``rows`` and ``cols`` are required; any other field missing takes the ``ArrayConfig``
        default. ``dataflow`` may hold codes (0/1/2) or names ("ws"/"os"/"is"). Every value is
        checked against the same rules as ``ArrayConfig``.

        Raises:
            ModelError: an unknown field, a missing ``rows``/``cols``, shapes that do not
                broadcast, or a value breaking a rule (the message names field, index, value).
        """
        unknown = [k for k in arrays if k not in _FIELDS]
        if unknown:
            raise ModelError(f"unknown design field {unknown[0]!r} (fields: {', '.join(_FIELDS)})")
        for required in ("rows", "cols"):
            if required not in arrays:
                raise ModelError(f"from_columns needs the {required!r} column")
        columns: dict[str, Any] = {}
        for field in dataclasses.fields(ArrayConfig):
            if field.name in arrays:
                columns[field.name] = arrays[field.name]
            else:
                default = field.default
                columns[field.name] = (timing.dataflow_code(default) if field.name == "dataflow"
                                       else _CODED[field.name].index(default) if field.name in _CODED else default)
        return cls._build(columns)

    @classmethod
    def _build(cls, columns: dict[str, Any]) -> DesignArrays:
        raw = {name: np.asarray(value) for name, value in columns.items()}
        flow = raw["dataflow"]
        if flow.dtype.kind in "USO":
            names = np.char.lower(flow.astype(str))
            codes = np.full(names.shape, -1, dtype=np.int64)
            for name, code in timing.DATAFLOW_CODES.items():
                codes[names == name] = code
            if (codes < 0).any():
                bad = flow.reshape(-1)[int(np.argmax(codes.reshape(-1) < 0))]
                raise ModelError(f"dataflow must be one of ws, os, is, not {str(bad)!r}")
            raw["dataflow"] = codes
        for field, known in _CODED.items():
            values = raw[field]
            if values.dtype.kind in "USO":
                names = values.astype(str)
                codes = np.full(names.shape, -1, dtype=np.int64)
                for code, name in enumerate(known):
                    codes[names == name] = code
                if (codes < 0).any():
                    bad = values.reshape(-1)[int(np.argmax(codes.reshape(-1) < 0))]
                    raise ModelError(f"{field} must be one of {', '.join(known)}, not {str(bad)!r}")
                raw[field] = codes
        try:
            shaped = np.broadcast_arrays(*raw.values())
        except ValueError as exc:
            shapes = ", ".join(f"{k}{v.shape}" for k, v in raw.items() if v.ndim)
            raise ModelError(f"design columns do not broadcast to one length: {shapes}") from exc
        full = {name: np.ascontiguousarray(a).reshape(-1) for name, a in zip(raw, shaped, strict=True)}
        out: dict[str, np.ndarray] = {}
        for name in _INT_FIELDS + ("dataflow", *_CODED):
            out[name] = _as_int(name, full[name])
        for name in _FLOAT_FIELDS:
            out[name] = _as_float(name, full[name])
        for name in ("double_buffered", "shadow_stationary", "vector_unit", "pack_int4"):
            out[name] = _as_bool(name, full[name])
        _check(out)
        return cls(**out)

    def take(self, index: Any) -> DesignArrays:
        """The designs at ``index`` (a slice, integer array or boolean mask)."""
        return DesignArrays(**{f.name: getattr(self, f.name)[index] for f in dataclasses.fields(self)})

    def operand_bits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per design, bits of an element of A, B and a requantised C in DRAM, on the bus and (A and B)
        in the buffers: ``input_bits``, or 4 for a packed int4 operand (``ArrayConfig.packed_kinds``:
        A and C with int4 activations, B with int4 weights; ``ArrayConfig.buffer_bits``)."""
        int4 = FORMAT_CODES.index("int4")
        ib = np.asarray(self.input_bits, dtype=np.int64)
        act = self.pack_int4 & (self.act_format == int4)
        weight = self.pack_int4 & (self.weight_format == int4)
        return np.where(act, 4, ib), np.where(weight, 4, ib), np.where(act, 4, ib)

    def config(self, i: int) -> ArrayConfig:
        """Design ``i`` as an ``ArrayConfig``."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)[i].item()
            values[f.name] = (_CODE_TO_DATAFLOW[value] if f.name == "dataflow"
                              else _CODED[f.name][value] if f.name in _CODED else value)
        return ArrayConfig(**values)


def _first_bad(name: str, values: np.ndarray, bad: np.ndarray, rule: str) -> None:
    if bad.any():
        i = int(np.argmax(bad))
        raise ModelError(f"{name}[{i}] must be {rule}, not {values[i].item()!r}")


def _as_int(name: str, values: np.ndarray) -> np.ndarray:
    if values.dtype == bool or values.dtype.kind not in "iuf":
        raise ModelError(f"{name} must hold integers, not {values.dtype} values")
    if values.dtype.kind == "f":
        _first_bad(name, values, ~np.isfinite(values) | (values != np.round(values)), "an integer")
    return values.astype(np.int64)


def _as_float(name: str, values: np.ndarray) -> np.ndarray:
    if values.dtype == bool or values.dtype.kind not in "iuf":
        raise ModelError(f"{name} must hold numbers, not {values.dtype} values")
    values = values.astype(np.float64)
    _first_bad(name, values, ~np.isfinite(values) | (values <= 0), "a positive finite number")
    return values


def _as_bool(name: str, values: np.ndarray) -> np.ndarray:
    if values.dtype != bool:
        raise ModelError(f"{name} must hold booleans, not {values.dtype} values")
    return values


def _check(cols: dict[str, np.ndarray]) -> None:
    for name, (low, high) in _LIMITS.items():
        values = cols[name]
        _first_bad(name, values, (values < low) | (values > high), f"an integer in [{low}, {high}]")
    ib = cols["input_bits"]
    _first_bad("input_bits", ib, ~np.isin(ib, INPUT_BITS), "8 or 16")
    ab = cols["acc_bits"]
    _first_bad("acc_bits", ab, (ab < 2 * ib) | (ab > 64), "an integer in [2 * input_bits, 64]")
    flow = cols["dataflow"]
    _first_bad("dataflow", flow, ~np.isin(flow, list(timing.DATAFLOW_CODES.values())),
               "a dataflow code 0 (ws), 1 (os) or 2 (is)")
    vec = cols["vector_unit"]
    packed = cols["pack_int4"]
    int4 = FORMAT_CODES.index("int4")
    bf16 = FORMAT_CODES.index("bf16")
    _first_bad("vector_unit", vec, vec & (((ib != 8) & (cols["act_format"] != bf16))
                                          | (packed & (cols["act_format"] == int4))),
               "false unless input_bits = 8 (or bf16 activations) and the activations are unpacked (the unit's door "
               "converts byte and bf16 lanes: accel_spec.vector_door)")
    _first_bad("pack_int4", packed, packed & (((cols["weight_format"] != int4) & (cols["act_format"] != int4))
                                              | (cols["rows"] % 2 != 0) | (cols["cols"] % 2 != 0)),
               "false unless an operand is int4 and rows and cols are even (two int4 lanes a byte)")
    for field, known in _CODED.items():
        codes = cols[field]
        _first_bad(field, codes, (codes < 0) | (codes >= len(known)),
                   f"a code in [0, {len(known) - 1}] ({', '.join(known)})")
