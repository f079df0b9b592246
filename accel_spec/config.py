"""``ArrayConfig``: the one description of an accelerator design (stdlib only).

The same frozen object goes to the RTL generator, the performance model, the simulator and
the search. It checks itself on construction, so an ``ArrayConfig`` that exists is valid;
variants are made by copy (``dataclasses.replace(config, rows=32)``), which checks again.

Units are in the field names: ``*_kib`` are KiB (1024 bytes) of on-chip SRAM,
``dram_bytes_per_cycle`` is bytes per accelerator clock cycle, ``clock_mhz`` is MHz and
``tech_nm`` the technology node in nanometres. ``dram`` names the memory part
(:data:`MEMORY_KINDS`, with its GB/s and pJ/bit and their sources; :data:`DEFAULT_MEMORY` when a
design names none); ``"none"`` is ideal memory: the bandwidth a plain per-cycle figure, no energy.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from accel_spec.errors import ConfigError, ConfigErrors
from accel_spec.number_formats import (
    AUTO,
    FORMAT_NAMES,
    NumberFormat,
    accumulator_rule,
    build_rule,
    datapath_bits,
    format_tag,
    int_format,
    parse_format,
)
from accel_spec.vector_door import vector_unit_rule

__all__ = ["ArrayConfig", "Dataflow", "INPUT_BITS", "FIELD_NAMES", "FORMAT_CODES", "FORMAT_NAMES", "MemoryKind",
           "MEMORY_KINDS", "MEMORY_NAMES", "NO_MEMORY", "NumberFormat", "CHECKSUMS", "CHECKSUM_DATAFLOWS",
           "checksum_weight_bits", "DATAFLOW_CODES", "MAX_POWER_DENSITY_W_MM2", "MODEL_ONLY_FIELDS", "DEFAULT_MEMORY",
           "IDEAL_MEMORY_LABEL", "memory_label"]

#: Supported operand widths (signed integers).
INPUT_BITS = (8, 16)

#: Values of ``checksum``: ``"none"``, or ``"detect"`` (ABFT checksums of every matrix run,
#: ``rtl_gen.core.checksum``), in code order (``perf_model`` keeps them as integer codes).
CHECKSUMS = ("none", "detect")
#: Dataflows whose RTL builds the ``"detect"`` checksum (OS is refused with a reason).
CHECKSUM_DATAFLOWS = ("ws", "is")
def checksum_weight_bits(cols: Any, input_bits: Any, acc_bits: Any) -> Any:
    """Bits of the checksum column's row sum of ``cols`` weights of ``input_bits``:
    ``min(acc_bits, input_bits + ceil(log2 cols))`` (``rtl_gen.core.checksum`` builds it, the model
    prices it). Takes Python ints or numpy arrays alike (comparisons and arithmetic only: ``ceil(log2 c)``
    is how many powers of two ``1, 2, 4, ...`` lie below ``c``), so both sides read this one rule."""
    grown = input_bits + sum((cols > (1 << i)) * 1 for i in range(32))
    return grown - (grown - acc_bits) * (grown > acc_bits)


#: Integer code of each dataflow (by its value): the RTL's ``CONFIG_DATAFLOW.CODE`` register and the
#: model's vectorised columns (:attr:`Dataflow.code`).
DATAFLOW_CODES = {"ws": 0, "os": 1, "is": 2}
#: The GEMM dims (``"m"``, ``"k"``, ``"n"``) each dataflow maps to ``(Ds, Dr, Dc)``: streamed, array rows,
#: array columns (:attr:`Dataflow.mapped_dims`).
_MAPPED_DIMS = {"ws": ("m", "k", "n"), "os": ("k", "m", "n"), "is": ("n", "k", "m")}

_MAX_DIM = 4096
_MAX_SRAM_KIB = 1 << 20  # 1 GiB per buffer is far beyond any real design
_TECH_NM = (5, 180)


class Dataflow(enum.StrEnum):
    """Which operand stays in the PEs.

    * ``WS`` weight stationary: K on array rows, N on columns, M streamed.
    * ``OS`` output stationary: M on rows, N on columns, K streamed.
    * ``IS`` input stationary: K on rows, M on columns, N streamed.
    """

    WS = "ws"
    OS = "os"
    IS = "is"

    @property
    def code(self) -> int:
        """The dataflow's integer code (:data:`DATAFLOW_CODES`: ws 0, os 1, is 2)."""
        return DATAFLOW_CODES[self.value]

    @property
    def mapped_dims(self) -> tuple[str, str, str]:
        """``(Ds, Dr, Dc)`` as GEMM dim names: the streamed dim, the one on the array's rows and the one
        on its columns. WS ``("m", "k", "n")``; OS ``("k", "m", "n")``; IS ``("n", "k", "m")`` (WS on
        the transposed problem)."""
        return _MAPPED_DIMS[self.value]

    @classmethod
    def parse(cls, value: object) -> Dataflow:
        """Return the dataflow named by ``value`` ("ws", "WS", or a ``Dataflow``)."""
        if isinstance(value, Dataflow):
            return value
        if isinstance(value, str):
            for member in cls:
                if value.lower() == member.value:
                    return member
        choices = ", ".join(m.value for m in cls)
        raise ConfigError(f"dataflow must be one of {choices}, not {value!r}")


@dataclasses.dataclass(frozen=True)
class MemoryKind:
    """One off-chip memory part: its peak bandwidth and its access energy.

    Attributes:
        name: the name a design uses (``dram = "ddr4-3200-x64"``).
        gb_per_s: peak bandwidth, 1e9 bytes per second (transfer rate x interface width).
        pj_per_bit: energy per bit moved (DRAM core, I/O and interface), pJ.
        source: where the two figures come from.
    """

    name: str
    gb_per_s: float
    pj_per_bit: float
    source: str


#: The value of ``dram`` that names no part, ideal memory: bandwidth is ``dram_bytes_per_cycle`` at any
#: clock and DRAM traffic costs no energy (an explicit choice, never the default).
NO_MEMORY = "none"
#: How every table and line shows ``dram = "none"``.
IDEAL_MEMORY_LABEL = "ideal memory"


def memory_label(dram: str) -> str:
    """``dram`` as tables show it: the part's name, or ``none (ideal memory)`` for ``"none"``."""
    return f"{NO_MEMORY} ({IDEAL_MEMORY_LABEL})" if dram == NO_MEMORY else dram

#: Known memory kinds, by name. Bandwidth is the JEDEC transfer rate times the interface width
#: (JESD79-3 DDR3, JESD79-4 DDR4, JESD209-5 LPDDR5, JESD235 HBM2E); energy per bit from the
#: sources named per entry (docs/physical.md has the table and the reasoning).
MEMORY_KINDS: dict[str, MemoryKind] = {m.name: m for m in (
    MemoryKind("ddr3-1600-x64", 12.8, 30.5,
               "1600 MT/s x 8 B; Horowitz ISSCC 2014: 1.3-2.6 nJ per 64-bit access (midpoint)"),
    MemoryKind("ddr3-2133-2x64", 34.1, 30.5,
               "two 2133 MT/s x 8 B channels, TPU v1's 34 GB/s (Jouppi et al. ISCA 2017); "
               "energy as ddr3-1600-x64"),
    MemoryKind("ddr4-3200-x64", 25.6, 15.0,
               "3200 MT/s x 8 B; ~15 pJ/bit for DDR4 (O'Connor et al. MICRO 2017, Fig. 1 range)"),
    MemoryKind("lpddr5-x32", 25.6, 5.0,
               "6400 MT/s x 4 B; ~5 pJ/bit for LPDDR4/5-class mobile DRAM (O'Connor et al. MICRO 2017)"),
    MemoryKind("hbm2e", 409.6, 3.9,
               "3.2 Gb/s per pin x 1024 pins per stack; HBM2 3.9 pJ/bit (O'Connor et al. MICRO 2017)"),
)}
#: ``dram`` values in code order (``perf_model`` keeps them as integer codes, ``none`` = 0).
MEMORY_NAMES: tuple[str, ...] = (NO_MEMORY, *MEMORY_KINDS)
#: The part a design that names no ``dram`` gets: one LPDDR5 x32 channel (25.6 GB/s, 5 pJ/bit). The
#: default design is edge-sized (45 nm, 1 GHz, 3 x 64 KiB of SRAM, 16 B/cycle), and LPDDR is what
#: chips of that size pair with; at clocks up to 1.6 GHz its 25.6 GB/s does not cap the default
#: 16 B/cycle, so the default's cycles are those of ``dram_bytes_per_cycle`` alone. Datacenter designs
#: name ``"hbm2e"`` (every shipped space names its part; docs/physical.md, "DRAM as a part").
DEFAULT_MEMORY = "lpddr5-x32"


def _check_int(name: str, value: object, low: int, high: int, rule: str | None = None) -> None:
    """Raise ``ConfigError`` unless ``value`` is an int (not a bool) in [low, high]."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return
    if rule is None:
        if low == 1:
            too_big = isinstance(value, int) and not isinstance(value, bool) and value > high
            rule = f"no larger than {high}" if too_big else "a positive integer"
        else:
            rule = f"an integer in [{low}, {high}]"
    raise ConfigError(f"{name} must be {rule}, not {value!r}")


#: Default of ``max_power_density_w_mm2``: the highest average on-die power density a design may
#: have, W/mm^2. The densest shipped datacenter accelerator we know, NVIDIA's H100 SXM5, puts at
#: most 700 W of board power (NVIDIA H100 datasheet) over a die of 814 mm^2 (NVIDIA Hopper
#: architecture whitepaper, 2022): 0.86 W/mm^2 with the best air and liquid cooling of its
#: generation; 1.0 rounds it up (``perf_model.physical.power_density`` applies it).
MAX_POWER_DENSITY_W_MM2 = 1.0

#: Ranges of the float fields (inclusive): where the model's results stay finite and positive.
_FLOAT_RANGES = {"dram_bytes_per_cycle": (1e-6, 1e9), "clock_mhz": (1e-3, 1e5),
                 "max_power_density_w_mm2": (1e-6, 1e6)}


def _check_float(name: str, value: object) -> None:
    low, high = _FLOAT_RANGES[name]
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(f"{name} must be a positive finite number, not {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{name} must be in [{low:g}, {high:g}], not {value!r}")


def _check_field(name: str, value: object, input_bits: object) -> None:
    """Raise ``ConfigError`` when ``value`` breaks field ``name``'s rule (``acc_bits`` reads ``input_bits``)."""
    if name in ("rows", "cols"):
        _check_int(name, value, 1, _MAX_DIM)
    elif name == "dataflow":
        Dataflow.parse(value)
    elif name == "input_bits":
        if type(value) is not int or value not in INPUT_BITS:
            raise ConfigError(f"input_bits must be 8 or 16, not {value!r}")
    elif name == "acc_bits":
        if type(input_bits) is int and input_bits in INPUT_BITS:  # else input_bits is the error
            _check_int(name, value, 2 * input_bits, 64, f"an integer in [2 * input_bits = {2 * input_bits}, 64]")
    elif name in ("ifmap_sram_kib", "weight_sram_kib", "ofmap_sram_kib"):
        _check_int(name, value, 1, _MAX_SRAM_KIB)
    elif name in _FLOAT_RANGES:
        _check_float(name, value)
    elif name in ("double_buffered", "shadow_stationary", "vector_unit", "pack_int4"):
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, not {value!r}")
    elif name == "tech_nm":
        _check_int(name, value, *_TECH_NM)
    elif name in _FORMAT_FIELDS:
        if value != AUTO:
            parse_format(value, field=name)
    elif name == "dram":
        if not isinstance(value, str) or value not in MEMORY_NAMES:
            raise ConfigError(f"dram must be one of {', '.join(MEMORY_NAMES)}, not {value!r}")
    elif name == "checksum":
        if not isinstance(value, str) or value not in CHECKSUMS:
            raise ConfigError(f"checksum must be one of {', '.join(CHECKSUMS)}, not {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ArrayConfig:
    """One TPU-style systolic-array accelerator design.

    Attributes:
        rows: PE array rows (R), 1..4096.
        cols: PE array columns (C), 1..4096.
        dataflow: which operand is stationary (see :class:`Dataflow`).
        input_bits: width of the signed integer operands, 8 or 16.
        acc_bits: accumulator width in bits, >= 2 * input_bits and <= 64.
        ifmap_sram_kib: input (activation) buffer, KiB.
        weight_sram_kib: weight buffer, KiB.
        ofmap_sram_kib: output/accumulator buffer, KiB.
        dram_bytes_per_cycle: off-chip bandwidth, bytes per clock cycle, 1e-6..1e9.
        clock_mhz: clock frequency, MHz, 1e-3..1e5 (1 kHz to 100 GHz).
        double_buffered: whether DRAM transfers overlap compute (ping-pong buffers).
        shadow_stationary: whether each PE holds a second (shadow) register for its stationary
            operand, so consecutive folds overlap: WS/IS load the next fold's stationary tile
            while the current fold streams (TPU v1's weight double buffering), OS drains the
            finished results while the next fold accumulates. Costs one register per PE.
        tech_nm: technology node for energy and area scaling, nm (5..180).
        dram: the off-chip memory part, a name of :data:`MEMORY_KINDS` (default
            :data:`DEFAULT_MEMORY`, ``"lpddr5-x32"``): the bandwidth the model uses is
            ``min(dram_bytes_per_cycle, GB/s / clock)`` and DRAM energy is the part's pJ/bit; or
            ``"none"``, ideal memory: ``dram_bytes_per_cycle`` at any clock and no DRAM energy.
        checksum: ``"none"`` (default) or ``"detect"``: every matrix run checks the sum of each
            output word against a checksum column at the array edge (exact modulo
            ``2**acc_bits``) and flags a mismatch (``rtl_gen.core.checksum``). WS and IS only;
            an OS design with ``"detect"`` is a valid description that the RTL refuses and the
            model reports infeasible, with that reason.
        weight_format: the weight (B) operand format, a name of
            :data:`~accel_spec.number_formats.FORMATS`, or ``"auto"`` (default): the signed
            integer of ``input_bits``.
        act_format: the activation (A) operand format, likewise (``"int8"`` with
            ``weight_format = "int4"`` is W4A8). With either set, ``input_bits`` is the datapath
            width the pair needs (``max(8, widest operand)``) and an ``"auto"`` partner is
            written out as the integer format it stood for; a pair of the same int8 or int16
            is kept as ``"auto"`` with that ``input_bits`` (one spelling per design). A pair the RTL does not build is
            refused with the rule (:func:`~accel_spec.number_formats.build_rule`).
        vector_unit: whether the design carries the vector unit (``rtl_gen.core.vector_unit``:
            residual add, product, ReLU/ReLU6, GELU, SiLU, LayerNorm/RMSNorm, softmax on int8
            words of the ifmap buffer, through ``VECTOR`` commands). Default ``false``: the RTL has
            no unit, the model charges it no area, and a workload's vector ops are host work
            (named, with their element counts). Its lanes are the ifmap word's
            (:attr:`vector_lanes`); it computes on int8, and a design whose activations are fp8,
            (unpacked) int4 or bf16 converts at its door (``accel_spec.vector_door``); int16
            activations are refused.
        max_power_density_w_mm2: the highest average on-die power density the design may run at
            on a workload, W/mm^2, 1e-6..1e6 (default :data:`MAX_POWER_DENSITY_W_MM2`, 1.0: the
            densest shipped datacenter accelerator, H100 SXM, runs at 0.86). A design above it is
            infeasible with the reason (``perf_model.physical.power_density``). A budget, not
            hardware: the RTL ignores it and it never enters :attr:`config_hash`
            (:data:`MODEL_ONLY_FIELDS`).
        pack_int4: whether int4 operands are packed two a byte in DRAM and on the bus
            (``docs/formats.md``, "Packed int4"): the weights' words with ``weight_format =
            "int4"``, the activations' and the requantised outputs' with ``act_format = "int4"``;
            the DMA sign-extends each nibble into its 8-bit buffer lane on a load and packs the
            output stage's lanes on a store. Default ``false``: an int4 element takes a byte
            everywhere (the meaning of a design file without the field). Needs an int4 operand
            and even ``rows`` and ``cols`` (whole bytes a word).
    """

    rows: int
    cols: int
    dataflow: Dataflow = Dataflow.WS
    input_bits: int = 8
    acc_bits: int = 32
    ifmap_sram_kib: int = 64
    weight_sram_kib: int = 64
    ofmap_sram_kib: int = 64
    dram_bytes_per_cycle: float = 16.0
    clock_mhz: float = 1000.0
    double_buffered: bool = True
    shadow_stationary: bool = True
    tech_nm: int = 45
    dram: str = DEFAULT_MEMORY
    checksum: str = "none"
    weight_format: str = AUTO
    act_format: str = AUTO
    vector_unit: bool = False
    pack_int4: bool = False
    max_power_density_w_mm2: float = MAX_POWER_DENSITY_W_MM2

    def __post_init__(self) -> None:
        for name in ("input_bits", *_FORMAT_FIELDS):
            _check_field(name, getattr(self, name), self.input_bits)
        resolved = _resolve_formats(self.input_bits, self.weight_format, self.act_format)
        if resolved is not None:
            weight, act = resolved
            plain = weight == act and weight.is_int and weight.bits in INPUT_BITS  # canonical: "auto"
            object.__setattr__(self, "weight_format", AUTO if plain else weight.name)
            object.__setattr__(self, "act_format", AUTO if plain else act.name)
            object.__setattr__(self, "input_bits", datapath_bits(weight, act))
        for field in FIELD_NAMES:
            _check_field(field, getattr(self, field), self.input_bits)
        if resolved is not None:
            rule = accumulator_rule(*resolved, self.acc_bits, self.checksum)
            if rule is not None:
                raise ConfigError(f"weight_format {resolved[0].name} with act_format {resolved[1].name}: {rule}")
        object.__setattr__(self, "dataflow", Dataflow.parse(self.dataflow))
        if self.pack_int4:
            rule = pack_int4_rule(self.weight_fmt.name, self.act_fmt.name, self.rows, self.cols)
            if rule is not None:
                raise ConfigError(f"pack_int4 = true {rule}")
        if self.vector_unit:
            rule = vector_unit_rule(self.act_fmt, self.input_bits, "ifmap" in self.packed_kinds)
            if rule is not None:
                raise ConfigError(f"vector_unit = true: {rule}")
        object.__setattr__(self, "dram_bytes_per_cycle", float(self.dram_bytes_per_cycle))
        object.__setattr__(self, "clock_mhz", float(self.clock_mhz))
        object.__setattr__(self, "max_power_density_w_mm2", float(self.max_power_density_w_mm2))

    # -- derived figures -------------------------------------------------------------------
    @property
    def pes(self) -> int:
        """Number of processing elements, rows * cols."""
        return self.rows * self.cols

    @property
    def weight_fmt(self) -> NumberFormat:
        """The weight operand's :class:`~accel_spec.number_formats.NumberFormat` (``"auto"`` resolved)."""
        return int_format(self.input_bits) if self.weight_format == AUTO else parse_format(self.weight_format)

    @property
    def act_fmt(self) -> NumberFormat:
        """The activation operand's :class:`~accel_spec.number_formats.NumberFormat` (``"auto"`` resolved)."""
        return int_format(self.input_bits) if self.act_format == AUTO else parse_format(self.act_format)

    @property
    def packed_kinds(self) -> frozenset[str]:
        """DRAM word kinds (``accel_spec.isa.dram_word_bytes``) whose lanes are packed int4,
        two a byte (:attr:`pack_int4`): ``weight`` for int4 weights, ``ifmap`` and ``requant``
        for int4 activations; empty without packing."""
        if not self.pack_int4:  # the formats resolved only where they can matter (every transfer asks)
            return frozenset()
        return packed_kinds(self.pack_int4, self.weight_fmt.name, self.act_fmt.name)

    @property
    def buffer_bits(self) -> tuple[int, int, int]:
        """Bits of an element in the ifmap, weight and ofmap buffers: ``input_bits``, or 4 for a
        packed int4 operand (:attr:`packed_kinds`: the buffers hold it two a byte, as DRAM and the
        bus do), and ``acc_bits`` in the ofmap."""
        kinds = self.packed_kinds
        return (4 if "ifmap" in kinds else self.input_bits, 4 if "weight" in kinds else self.input_bits,
                self.acc_bits)

    @property
    def format_tag(self) -> str:
        """Short name of the operand formats: ``i8`` for plain ``input_bits`` integers, else e.g. ``w4a8``."""
        return format_tag(self.input_bits, self.weight_format, self.act_format)

    @property
    def peak_macs_per_s(self) -> float:
        """Peak multiply-accumulates per second at ``clock_mhz``."""
        return self.pes * self.clock_mhz * 1e6

    # -- serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/TOML-ready dict of all fields (dataflow as its string value)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["dataflow"] = self.dataflow.value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "design") -> ArrayConfig:
        """Build from a mapping, rejecting unknown keys (with a suggestion) and bad values.

        Every problem one pass finds is reported: each unknown key, each missing required key and
        each bad value (:class:`~accel_spec.errors.ConfigErrors` when there are several).
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must be a table of ArrayConfig fields, not {data!r}")
        problems = []
        for key in data:
            if key not in FIELD_NAMES:
                close = difflib.get_close_matches(str(key), FIELD_NAMES, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(FIELD_NAMES)})"
                problems.append(f"unknown key {key!r} in {where}{hint}")
        problems += [f"{where} is missing required key {name!r}" for name in _REQUIRED if name not in data]
        input_bits = data.get("input_bits", _INPUT_BITS_DEFAULT)
        try:
            input_bits = _data_input_bits(data, input_bits)
        except ConfigError as exc:
            problems.append(str(exc))
        for name in FIELD_NAMES:
            if name in data:
                try:
                    _check_field(name, data[name], input_bits)
                except ConfigError as exc:
                    problems.append(str(exc))
        if problems:
            raise ConfigErrors.of(list(dict.fromkeys(problems)))
        return cls(**{**dict(data), "input_bits": input_bits})

    @property
    def vector_lanes(self) -> int:
        """Lanes of the vector unit: those of an ifmap word (``R`` for WS/OS, ``C`` for IS), or 0
        without the unit (``vector_unit = false``). The RTL builds and the model charges these."""
        if not self.vector_unit:
            return 0
        return self.cols if self.dataflow is Dataflow.IS else self.rows

    @property
    def config_hash(self) -> str:
        """Stable 12-hex-digit SHA-256 digest of the canonical JSON of :meth:`to_dict`.

        Fields added after designs were first hashed are left out while they hold their
        neutral default (:data:`_HASH_NEUTRAL`: ``dram`` = :data:`DEFAULT_MEMORY`, ``checksum = "none"``,
        ``vector_unit = false``), so an existing design keeps
        its hash (studies, claims and caches keyed by it stay valid). The operand formats are
        left out while they are ``"auto"`` (both the signed integer of ``input_bits``). The fields
        of :data:`MODEL_ONLY_FIELDS` (budgets the RTL ignores) are always left out: the hash names
        the hardware, and the Verilog's module names carry it.
        """
        data = {k: v for k, v in self.to_dict().items()
                if _HASH_NEUTRAL.get(k, _UNSET) != v and k not in MODEL_ONLY_FIELDS}
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    def short_name(self) -> str:
        """Human-readable one-word summary, e.g. ``16x16-ws-i8``."""
        return f"{self.rows}x{self.cols}-{self.dataflow.value}-{self.format_tag}"


def _resolve_formats(input_bits: int, weight: str, act: str) -> tuple[NumberFormat, NumberFormat] | None:
    """The operand pair when either format is set (``"auto"`` read with ``input_bits``), else ``None``.

    Raises:
        ConfigError: a pair the RTL does not build (the rule named).
    """
    if weight == AUTO and act == AUTO:
        return None
    w = int_format(input_bits) if weight == AUTO else parse_format(weight, field="weight_format")
    a = int_format(input_bits) if act == AUTO else parse_format(act, field="act_format")
    rule = build_rule(w, a)
    if rule is not None:
        raise ConfigError(f"weight_format {w.name} with act_format {a.name}: {rule}")
    return w, a


def _data_input_bits(data: Mapping[str, Any], input_bits: Any) -> Any:
    """``input_bits`` a design file stands for: its own, or the formats' datapath width when absent.

    Raises:
        ConfigError: a bad format, a pair the RTL does not build, or an ``input_bits`` that
            is not the datapath width of the formats it names.
    """
    formats = [data.get(name, AUTO) for name in _FORMAT_FIELDS]
    if type(input_bits) is not int or input_bits not in INPUT_BITS:
        return input_bits  # reported as input_bits' own error
    for name, value in zip(_FORMAT_FIELDS, formats, strict=True):
        _check_field(name, value, input_bits)
    resolved = _resolve_formats(input_bits, *formats)
    if resolved is None:
        return input_bits
    width = datapath_bits(*resolved)
    if "input_bits" in data and input_bits != width:
        raise ConfigError(f"input_bits must be {width} for weight_format {resolved[0].name} with act_format "
                          f"{resolved[1].name} (the datapath width, max(8, widest operand)), not {input_bits!r}")
    return width


def pack_int4_rule(weight: str, act: str, rows: int, cols: int) -> str | None:
    """Why ``pack_int4 = true`` cannot hold for these operand formats and array, or ``None``."""
    if INT4 not in (weight, act):
        return f"needs an int4 operand, not weight_format {weight} with act_format {act}"
    if rows % 2 or cols % 2:
        return f"needs even rows and cols (two int4 lanes a byte), not {rows}x{cols}"
    return None


def packed_kinds(pack_int4: bool, weight: str, act: str) -> frozenset[str]:
    """Word kinds whose lanes are packed int4 (see :attr:`ArrayConfig.packed_kinds`)."""
    if not pack_int4:
        return frozenset()
    return frozenset((("weight",) if weight == INT4 else ()) + (("ifmap", "requant") if act == INT4 else ()))


#: The format packed two a byte with ``pack_int4``.
INT4 = "int4"

_UNSET = object()
#: Fields left out of ``config_hash`` while they hold these values (see ``config_hash``).
#: Fields that describe a budget the model applies, not hardware: the RTL ignores them and
#: ``config_hash`` leaves them out whatever their value.
MODEL_ONLY_FIELDS: tuple[str, ...] = ("max_power_density_w_mm2",)
#: ``dram``'s neutral value is the default part: a design file that names no part keeps the hash it had
#: when the default was ``"none"`` (its hardware is the same; only the model's DRAM pricing changed).
_HASH_NEUTRAL: dict[str, Any] = {"dram": DEFAULT_MEMORY, "checksum": "none", "weight_format": AUTO, "act_format": AUTO,
                                 "vector_unit": False, "pack_int4": False}

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ArrayConfig))
#: Values of ``weight_format`` / ``act_format`` in code order (``perf_model`` keeps integer codes, ``auto`` = 0).
FORMAT_CODES: tuple[str, ...] = (AUTO, *FORMAT_NAMES)
_FORMAT_FIELDS = ("weight_format", "act_format")
_INPUT_BITS_DEFAULT = next(f.default for f in dataclasses.fields(ArrayConfig) if f.name == "input_bits")
_REQUIRED = tuple(
    f.name
    for f in dataclasses.fields(ArrayConfig)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
)
