"""``SystemConfig`` and ``Split``: pods of one chip design, and how a job is laid out on them (stdlib only).

A system is ``pods`` pods of identical chips. A chip is ``cores`` copies of one
:class:`~accel_spec.config.ArrayConfig` (the design the rest of accel-dse models: its
``dram_bytes_per_cycle`` is each core's share of the chip's HBM bandwidth). Inside a pod the chips
sit on a ``ring``, a ``torus2d`` or a ``torus3d`` of inter-chip links (``dims`` chips per axis,
with or without ``wraparound``), or on a ``switch`` (every chip one link to a crossbar, as
NVSwitch); pods are joined by a data-centre network (DCN) of ``dcn_gb_per_s`` per chip.

A :class:`Split` says how an LLM job is cut over the chips: ``dp`` data parallel (with ZeRO
stage ``zero``: 0 plain, 1 optimizer state, 2 and gradients, 3 and weights, i.e. FSDP),
``tp`` tensor parallel (Megatron), ``pp`` pipeline stages, ``ep`` expert parallel (a part of
``dp``), ``microbatch`` sequences per pipeline microbatch, ``recompute`` the fraction of the
forward pass recomputed in the backward pass (0 none, 1 full activation recomputation),
``overlap`` whether data-parallel collectives run under the backward pass.
Options of the splits people use: ``selective`` recomputes only the attention core (scores,
softmax, context; Korthikanti et al. 2022) instead of ``recompute``; ``sequence_parallel`` shards
the norms', dropouts' and residuals' activations over ``tp`` (the all-reduces become reduce-scatter
+ all-gather pairs of the same volume); ``interleave`` model chunks per pipeline stage (the
interleaved 1F1B schedule, Narayanan et al. 2021); ``zero_gather`` how ZeRO-3 issues its
collectives: one per ``layer`` (FSDP's per-layer wrapping) or one per weight ``tensor`` (DeepSpeed
ZeRO-3 of 2021); ``capacity_factor`` the MoE expert capacity (GShard, Lepikhin et al. 2020; Switch,
Fedus et al. 2021): each expert takes at most ``capacity_factor * tokens * top_k / experts`` of the
tokens routed to it and computes (and exchanges in the all-to-alls) buffers of that size whether full or
not; ``0`` is dropless routing with the tokens spread evenly (the expert GEMMs and all-to-alls carry
exactly the routed tokens). ``pp`` need not divide the layers: the stages take them as evenly as possible,
the first and last stages (embedding, LM head) the fewer.

Both check themselves on construction (errors name the field, the rule and the value); units are
in the field names (``gb_per_s``: 1e9 bytes per second, one direction; ``_us``: microseconds;
``hbm_gib``: GiB per chip).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError

__all__ = ["SystemConfig", "Split", "TOPOLOGIES", "SYSTEM_FIELDS", "SPLIT_FIELDS", "DCN_RINGS", "ZERO_GATHERS",
           "MIN_CAPACITY", "MAX_CAPACITY"]

#: Topology kinds and how many ``dims`` each has.
TOPOLOGIES: dict[str, int] = {"ring": 1, "torus2d": 2, "torus3d": 3, "switch": 1}

_MAX_CHIPS = 1 << 20

#: How collectives across the DCN run (:attr:`SystemConfig.dcn_rings`).
DCN_RINGS = ("hierarchical", "flat")
#: How ZeRO-3 issues its weight all-gathers and gradient reduce-scatters (:attr:`Split.zero_gather`).
ZERO_GATHERS = ("layer", "tensor")
#: Largest third of a shared cache, KiB (the largest buffer a design may have).
MAX_L2_KIB = 1 << 20
#: Bounds of a nonzero :attr:`Split.capacity_factor` (below 1 drops tokens; Switch used 1 to 2).
MIN_CAPACITY, MAX_CAPACITY = 0.25, 64.0


def _int(owner: str, name: str, value: object, low: int = 1, high: int = _MAX_CHIPS) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    rule = "a positive integer" if low == 1 else f"an integer in [{low}, {high}]"
    if isinstance(value, int) and not isinstance(value, bool) and value > high:
        rule = f"no larger than {high}"
    raise ConfigError(f"{owner} {name} must be {rule}, not {value!r}")


#: Largest value of a system's number field (GiB, GB/s, us): far past any machine, and small enough
#: that a product of a few of them (bytes from GiB, a step's time) stays finite.
MAX_FIELD = 1e12


def _float(owner: str, name: str, value: object, *, zero_ok: bool = False) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        if value > MAX_FIELD:
            raise ConfigError(f"{owner} {name} must be at most {MAX_FIELD:g}, not {value!r}")
        if value >= 0 if zero_ok else value > 0:
            return float(value)
    rule = "a non-negative finite number" if zero_ok else "a positive finite number"
    raise ConfigError(f"{owner} {name} must be {rule}, not {value!r}")


def _bool(owner: str, name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise ConfigError(f"{owner} {name} must be true or false, not {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SystemConfig:
    """Pods of one chip design joined by inter-chip links, and pods joined by a DCN.

    Attributes:
        chip: the design of one core (an :class:`ArrayConfig`).
        cores: identical cores per chip; each runs ``1 / cores`` of every op.
        topology: ``ring``, ``torus2d``, ``torus3d`` or ``switch``.
        dims: chips per axis (one per axis of the topology); their product is the pod's chips.
        wraparound: the torus/ring axes close (a torus); ``False`` makes them lines (a mesh).
        link_gb_per_s: bandwidth of one link in one direction, GB/s (for ``switch``: each chip's).
        link_latency_us: latency per hop, microseconds.
        hbm_gib: memory per chip, GiB.
        pods: pods joined by the DCN.
        dcn_gb_per_s: DCN bandwidth per chip, one direction, GB/s (needed when ``pods > 1``).
        dcn_latency_us: DCN latency per message, microseconds.
        l2_mib: an on-chip cache shared by the chip's cores, MiB (as a GPU's L2); ``0``: none, each
            core streams its operands from HBM at its share of the bandwidth. With a shared cache
            each core streams from it at ``l2_gb_per_s / cores``, and HBM carries each op's
            traffic with the cache as its buffers (operands the cores share are fetched once).
        l2_gb_per_s: the shared cache's bandwidth to all cores together, GB/s (needed with ``l2_mib``).
        dcn_rings: how collectives that reach across the DCN are run: ``hierarchical`` (in the pod,
            then across pods: latency the sum over axes) or ``flat`` (one ring through every member,
            as NCCL's ring algorithm: ``N - 1`` steps, each at the slowest hop's latency).
        name: a label.
    """

    chip: ArrayConfig
    cores: int = 1
    topology: str = "torus3d"
    dims: tuple[int, ...] = (4, 4, 4)
    wraparound: bool = True
    link_gb_per_s: float = 50.0
    link_latency_us: float = 1.0
    hbm_gib: float = 32.0
    pods: int = 1
    dcn_gb_per_s: float = 0.0
    dcn_latency_us: float = 10.0
    dcn_rings: str = "hierarchical"
    l2_mib: float = 0.0
    l2_gb_per_s: float = 0.0
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.chip, ArrayConfig):
            raise ConfigError(f"system chip must be an ArrayConfig (a [design] table), not {self.chip!r}")
        _int("system", "cores", self.cores, 1, 1 << 16)
        if self.topology not in TOPOLOGIES:
            raise ConfigError(f"system topology must be one of {', '.join(TOPOLOGIES)}, not {self.topology!r}")
        dims = self.dims
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = (dims,)
        if not isinstance(dims, (list, tuple)):
            raise ConfigError(f"system dims must be a list of positive integers, not {dims!r}")
        dims = tuple(_int("system", "dims entry", d) for d in dims)
        want = TOPOLOGIES[self.topology]
        if len(dims) != want:
            raise ConfigError(f"system dims must have {want} entr{'y' if want == 1 else 'ies'} for a "
                              f"{self.topology}, not {len(dims)} ({list(dims)})")
        object.__setattr__(self, "dims", dims)
        _int("system", "chips per pod (the product of dims)", math.prod(dims))
        _bool("system", "wraparound", self.wraparound)
        object.__setattr__(self, "link_gb_per_s", _float("system", "link_gb_per_s", self.link_gb_per_s))
        object.__setattr__(self, "link_latency_us",
                           _float("system", "link_latency_us", self.link_latency_us, zero_ok=True))
        object.__setattr__(self, "hbm_gib", _float("system", "hbm_gib", self.hbm_gib))
        _int("system", "pods", self.pods)
        _int("system", "chips (pods * chips per pod)", self.chips)
        object.__setattr__(self, "dcn_gb_per_s", _float("system", "dcn_gb_per_s", self.dcn_gb_per_s, zero_ok=True))
        if self.pods > 1 and self.dcn_gb_per_s <= 0:
            raise ConfigError(f"system dcn_gb_per_s must be positive when pods > 1, not {self.dcn_gb_per_s!r}")
        object.__setattr__(self, "dcn_latency_us",
                           _float("system", "dcn_latency_us", self.dcn_latency_us, zero_ok=True))
        object.__setattr__(self, "l2_mib", _float("system", "l2_mib", self.l2_mib, zero_ok=True))
        object.__setattr__(self, "l2_gb_per_s", _float("system", "l2_gb_per_s", self.l2_gb_per_s, zero_ok=True))
        if self.l2_mib > 0 and self.l2_gb_per_s <= 0:
            raise ConfigError(f"system l2_gb_per_s must be positive when l2_mib > 0 (the shared cache's "
                              f"bandwidth), not {self.l2_gb_per_s!r}")
        if self.l2_mib * 1024 / 3 > MAX_L2_KIB:
            raise ConfigError(f"system l2_mib must be at most {3 * MAX_L2_KIB / 1024:g}, not {self.l2_mib!r}")
        if self.dcn_rings not in DCN_RINGS:
            raise ConfigError(f"system dcn_rings must be one of {', '.join(DCN_RINGS)}, not {self.dcn_rings!r}")
        if not isinstance(self.name, str):
            raise ConfigError(f"system name must be a string, not {self.name!r}")

    @property
    def chips_per_pod(self) -> int:
        """Chips in one pod: the product of ``dims``."""
        return math.prod(self.dims)

    @property
    def chips(self) -> int:
        """All chips: ``pods * chips_per_pod``."""
        return self.pods * math.prod(self.dims)

    @property
    def peak_macs_per_s(self) -> float:
        """Peak multiply-accumulates per second of one chip (``cores`` arrays)."""
        return self.cores * self.chip.peak_macs_per_s

    @property
    def hbm_bytes(self) -> float:
        """Memory per chip, bytes."""
        return self.hbm_gib * 2**30

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (the chip as its design dict)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["chip"] = self.chip.to_dict()
        out["dims"] = list(self.dims)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], chip: ArrayConfig, *, where: str = "[system]") -> SystemConfig:
        """Build from a ``[system]`` table (without its ``chip``/``split``) and a chip design.

        The table may state ``chips`` (all chips); it must equal ``pods`` times the product of ``dims``.
        """
        _unknown(data, (*SYSTEM_FIELDS, "chips"), where)
        fields = dict(data)
        stated = fields.pop("chips", None)
        if "dims" in fields and isinstance(fields["dims"], list):
            fields["dims"] = tuple(fields["dims"])
        system = cls(chip=chip, **fields)
        if stated is not None:
            _int("system", "chips", stated)
            if stated != system.chips:
                pods = f" times {system.pods} pods" if system.pods > 1 else ""
                raise ConfigError(f"system dims {list(system.dims)}{pods} make {system.chips} chips, not the "
                                  f"{stated} chips given (the product of dims times pods must equal chips)")
        return system


@dataclasses.dataclass(frozen=True, kw_only=True)
class Split:
    """How an LLM job is cut over the chips (see the module docstring).

    ``dp * tp * pp`` must equal the system's chips; ``ep`` divides ``dp``; the model checks that
    ``tp``, ``pp`` and ``ep`` divide the model's heads, layers and experts.
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    zero: int = 0
    microbatch: int = 1
    recompute: float = 0.0
    overlap: bool = True
    selective: bool = False
    sequence_parallel: bool = False
    interleave: int = 1
    zero_gather: str = "layer"
    capacity_factor: float = 0.0

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "ep", "microbatch"):
            _int("split", name, getattr(self, name))
        _int("split", "zero", self.zero, 0, 3)
        if self.dp % self.ep:
            raise ConfigError(f"split ep must divide dp (experts are spread over data-parallel chips), "
                              f"not ep={self.ep} with dp={self.dp}")
        value = self.recompute
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ConfigError(f"split recompute must be a number in [0, 1], not {value!r}")
        object.__setattr__(self, "recompute", float(value))
        _bool("split", "overlap", self.overlap)
        _bool("split", "selective", self.selective)
        _bool("split", "sequence_parallel", self.sequence_parallel)
        _int("split", "interleave", self.interleave, 1, 1 << 10)
        if self.selective and self.recompute:
            raise ConfigError(f"split selective recomputes the attention core instead of recompute; "
                              f"recompute must be 0 with it, not {self.recompute:g}")
        if self.interleave > 1 and self.pp == 1:
            raise ConfigError(f"split interleave needs pipeline stages (pp > 1), not interleave={self.interleave} "
                              "with pp=1")
        cf = self.capacity_factor
        if (isinstance(cf, bool) or not isinstance(cf, (int, float)) or not math.isfinite(cf)
                or not (cf == 0 or MIN_CAPACITY <= cf <= MAX_CAPACITY)):
            raise ConfigError(f"split capacity_factor must be 0 (dropless) or a number in [{MIN_CAPACITY:g}, "
                              f"{MAX_CAPACITY:g}], not {cf!r}")
        object.__setattr__(self, "capacity_factor", float(cf))
        if self.zero_gather not in ZERO_GATHERS:
            raise ConfigError(f"split zero_gather must be one of {', '.join(ZERO_GATHERS)}, "
                              f"not {self.zero_gather!r}")

    @property
    def chips(self) -> int:
        """Chips the split uses: ``dp * tp * pp``."""
        return self.dp * self.tp * self.pp

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def label(self) -> str:
        """Short text, e.g. ``dp=8 tp=4 pp=2 ep=1 zero=1 mb=1``."""
        return (f"dp={self.dp} tp={self.tp} pp={self.pp} ep={self.ep} zero={self.zero} mb={self.microbatch}"
                + (f" recompute={self.recompute:g}" if self.recompute else "")
                + (" selective" if self.selective else "") + (" sp" if self.sequence_parallel else "")
                + (f" interleave={self.interleave}" if self.interleave > 1 else "")
                + (" per-tensor" if self.zero == 3 and self.zero_gather == "tensor" else "")
                + (f" capacity={self.capacity_factor:g}" if self.capacity_factor else ""))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "split") -> Split:
        _unknown(data, SPLIT_FIELDS, where)
        return cls(**dict(data))


SYSTEM_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SystemConfig) if f.name != "chip")
SPLIT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Split))


def _unknown(data: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a table, not {data!r}")
    for key in data:
        if key not in known:
            raise ConfigError(f"unknown key {key!r} in {where} (known: {', '.join(known)})")
