"""The silent-data-corruption campaign: inject faults into a simulated accelerator, count what
corrupts the output and what the checksum detects.

Each trial is one buffer-resident GEMM run of random size (a few folds, edge folds included)
with random int operands on the Amaranth simulation of the design (``rtl_gen.Accelerator``),
with at most one fault (:class:`FaultSpec`): a single-bit transient flip of a register or
SRAM word at one cycle of the run, or a bit stuck at 0/1 from that cycle to the end of the
run (re-applied every cycle). The output is compared with the golden JAX product (int32
accumulation, wrapped to ``acc_bits``); the design's ``sdc`` flag is read
``CHECK_LATENCY`` cycles after ``done``. Fault-free trials are mixed in: any flag there is a
false alarm (and any wrong output a bug, raised).

Per place (:data:`accel_dse.sdc.places.PLACES`) the campaign counts: faults injected, those
that corrupted the output, those of them detected, the escapes (corrupted and not detected)
and detections without corruption (a fault in a value no output used, or in the checksum's
own path). An unprotected design (``checksum = "none"``) detects nothing: the baseline.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from accel_dse.config import ArrayConfig, Dataflow
from accel_dse.errors import ConfigError
from accel_dse.sdc.places import FAULT_KINDS, PLACES, FaultSpec, check_faults, check_places

__all__ = ["FaultSpec", "PlaceTally", "CampaignResult", "run_campaign", "draw_faults"]


@dataclasses.dataclass
class PlaceTally:
    """What the faults of one place did."""

    injected: int = 0
    corrupted: int = 0
    detected: int = 0
    benign_detected: int = 0

    @property
    def escapes(self) -> int:
        """Faults that corrupted the output and were not detected."""
        return self.corrupted - self.detected

    @property
    def coverage(self) -> float | None:
        """Detected share of the corrupting faults (None when none corrupted)."""
        return self.detected / self.corrupted if self.corrupted else None


@dataclasses.dataclass
class CampaignResult:
    """A campaign on one design: per-place tallies, and the fault-free runs and their alarms."""

    config: ArrayConfig
    tallies: dict[str, PlaceTally]
    clean_runs: int = 0
    false_alarms: int = 0

    def coverage(self, places: tuple[str, ...] | None = None) -> float | None:
        """Detected share of the corrupting faults over ``places`` (default: all injected)."""
        names = places or tuple(self.tallies)
        corrupted = sum(self.tallies[p].corrupted for p in names if p in self.tallies)
        detected = sum(self.tallies[p].detected for p in names if p in self.tallies)
        return detected / corrupted if corrupted else None


def _dims(rng: np.random.Generator, config: ArrayConfig) -> tuple[int, int, int]:
    """A GEMM of one to three folds per mapped dimension, edge folds likely."""
    hi = 2 * max(config.rows, config.cols) + 1
    m, k, n = (int(x) for x in rng.integers(1, hi + 1, 3))
    return m, k, n


def draw_faults(config: ArrayConfig, places: tuple[str, ...], per_place: int, seed: int) -> list[FaultSpec]:
    """``per_place`` random faults for each place (targets within the array and the words a run uses)."""
    rng = np.random.default_rng(seed)
    r, c, ib, ab = config.rows, config.cols, config.input_bits, config.acc_bits
    weight_regs = ("s", "w") if config.shadow_stationary else ("s",)
    out = []
    for place in places:
        for _ in range(per_place):
            kind = FAULT_KINDS[int(rng.integers(len(FAULT_KINDS)))]
            row, col = int(rng.integers(r)), int(rng.integers(c))
            target: tuple[Any, ...]
            if place == "pe_operand":
                target, bits = (row, col, "a"), ib
            elif place == "pe_weight":
                target, bits = (row, col, weight_regs[int(rng.integers(len(weight_regs)))]), ib
            elif place == "pe_psum":
                target, bits = (row, col, "v"), ab
            elif place == "operand_buffer":
                buf = ("ifmap", "weight")[int(rng.integers(2))]
                target, bits = (buf, int(rng.integers(1 << 30)), int(rng.integers(1 << 30))), ib
            elif place == "ofmap_buffer":
                target, bits = ("ofmap", int(rng.integers(c)), int(rng.integers(1 << 30))), ab
            else:  # dma
                buf = ("ifmap", "weight")[int(rng.integers(2))]
                target, bits = (buf, int(rng.integers(1 << 30))), 0
            out.append(FaultSpec(place, target, int(rng.integers(1 << 30)) if not bits else int(rng.integers(bits)),
                                 kind, int(rng.integers(1 << 30))))
    return out


def _golden(a: np.ndarray, b: np.ndarray, acc_bits: int) -> np.ndarray:
    """``A @ B`` by JAX with exact int32 accumulation, as int64 wrapped to ``acc_bits``."""
    import jax.numpy as jnp

    product = np.asarray(jnp.matmul(jnp.asarray(a, jnp.int32), jnp.asarray(b, jnp.int32),
                                    preferred_element_type=jnp.int32), dtype=np.int64)
    mask = (1 << acc_bits) - 1
    wrapped = product & mask
    return np.where(wrapped >> (acc_bits - 1), wrapped - (1 << acc_bits), wrapped)


def run_campaign(config: ArrayConfig, *, places: tuple[str, ...] | list[str] = tuple(PLACES),
                 faults_per_place: int = 50, clean_runs: int = 20, seed: int = 0) -> CampaignResult:
    """Run the campaign on ``config`` (module docstring).

    Args:
        config: the design (small: every trial is simulated in Python). ``acc_bits`` must be 32
            (the golden product accumulates in int32).
        places: names of :data:`PLACES`.
        faults_per_place: faults per place, 1 .. ``MAX_FAULTS_PER_PLACE``.
        clean_runs: fault-free trials (false-alarm check), >= 0.
        seed: seeds the faults, sizes and operands.

    Raises:
        ConfigError: an unknown place, a count out of bounds, ``acc_bits`` other than 32.
    """
    places = check_places(tuple(places))
    check_faults(faults_per_place)
    if isinstance(clean_runs, bool) or not isinstance(clean_runs, int) or clean_runs < 0:
        raise ConfigError(f"clean runs must be a non-negative integer, not {clean_runs!r}")
    if config.acc_bits != 32:
        raise ConfigError(f"the campaign's golden product accumulates in int32: acc_bits must be 32, not "
                          f"{config.acc_bits}")
    from accel_dse.sdc._sim import simulate_trials

    faults: list[FaultSpec | None] = list(draw_faults(config, places, faults_per_place, seed))
    faults += [None] * clean_runs
    rng = np.random.default_rng(seed + 1)
    order = rng.permutation(len(faults))
    trials = []
    lo, hi = -(1 << (config.input_bits - 1)), 1 << (config.input_bits - 1)
    for i in order:
        m, k, n = _dims(rng, config)
        a, b = rng.integers(lo, hi, (m, k)), rng.integers(lo, hi, (k, n))
        trials.append((a, b, faults[i]))
    outcomes = simulate_trials(config, trials)
    result = CampaignResult(config, {p: PlaceTally() for p in places})
    for (a, b, fault), (c, flagged) in zip(trials, outcomes, strict=True):
        wrong = not np.array_equal(c, _golden(a, b, config.acc_bits))
        if fault is None:
            if wrong:
                raise ConfigError(f"fault-free run of {a.shape[0]}x{a.shape[1]}x{b.shape[1]} on "
                                  f"{config.short_name()} differs from the golden product (an RTL bug)")
            result.clean_runs += 1
            result.false_alarms += int(flagged)
            continue
        tally = result.tallies[fault.place]
        tally.injected += 1
        tally.corrupted += int(wrong)
        tally.detected += int(wrong and flagged)
        tally.benign_detected += int(flagged and not wrong)
    return result


def supported(config: ArrayConfig) -> bool:
    """Whether the campaign can run ``config`` (the checksum's dataflows, or no checksum)."""
    return config.checksum == "none" or config.dataflow is not Dataflow.OS
