"""The silent-data-corruption campaign: inject faults into a simulated accelerator, count what
corrupts the output and what the design detects.

Each trial is one buffer-resident GEMM run of random size (a few folds, edge folds included)
with random int8 operands and random per-channel requantisation parameters, on a cocotb +
Verilator build of the design (:mod:`accel_dse.sdc._sim`), with at most one fault
(:class:`FaultSpec`): a single-bit transient flip at one cycle, or a bit stuck at 0/1 from that
cycle to the end of the trial. The trial reads every result back raw (the accumulators) and
requantised (through the output stage); the output is corrupted when either differs from the
golden JAX result (int32 accumulation wrapped to ``acc_bits``, then ``workloads``' output
stage). The design detected it when its run checksum flagged the run or its output-stage check
flagged a word read back. Fault-free trials are mixed in: any flag there is a false alarm (and
any wrong output a bug, raised).

Per place (:data:`accel_dse.sdc.places.PLACES`) the campaign counts: faults injected, those
that corrupted the output, those of them detected, the escapes (corrupted and not detected)
and detections without corruption (a fault in a value no output used, or in the checks' own
logic). An unprotected design (``checksum = "none"``) detects nothing: the baseline.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from accel_dse.sdc.places import FAULT_KINDS, PLACES, FaultSpec, check_faults, check_places
from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ConfigError

__all__ = ["FaultSpec", "PlaceTally", "CampaignResult", "run_campaign", "draw_faults", "lower_bound"]


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


def lower_bound(detected: int, total: int, confidence: float = 0.95) -> float | None:
    """One-sided Clopper-Pearson (exact binomial) lower confidence bound of a detection rate of
    ``detected`` in ``total`` (None when ``total`` is 0); ``0.05 ** (1 / total)`` when all detected."""
    if total == 0:
        return None
    if detected == 0:
        return 0.0
    from scipy.stats import beta

    return float(beta.ppf(1.0 - confidence, detected, total - detected + 1))


def _dims(rng: np.random.Generator, config: ArrayConfig) -> tuple[int, int, int]:
    """A GEMM of one to three folds per mapped dimension, edge folds likely."""
    hi = 2 * max(config.rows, config.cols) + 1
    m, k, n = (int(x) for x in rng.integers(1, hi + 1, 3))
    return m, k, n


def draw_faults(config: ArrayConfig, places: tuple[str, ...], per_place: int | dict[str, int],
                seed: int) -> list[FaultSpec]:
    """``per_place`` random faults for each place (a count, or a count per place name); targets
    within the array and the words a run uses."""
    rng = np.random.default_rng(seed)
    r, c, ib, ab = config.rows, config.cols, config.input_bits, config.acc_bits
    weight_regs = ("s", "w") if config.shadow_stationary else ("s",)
    out = []
    for place in places:
        for _ in range(per_place[place] if isinstance(per_place, dict) else per_place):
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
            elif place == "output_stage":
                target, bits = (int(rng.integers(1 << 30)),), 64  # a register, a bit (both mod its width)
            elif place == "ofmap_buffer":
                target, bits = ("ofmap", int(rng.integers(c)), int(rng.integers(1 << 30))), ab
            else:  # dma
                buf = ("ifmap", "weight")[int(rng.integers(2))]
                target, bits = (buf, int(rng.integers(1 << 30))), 0
            out.append(FaultSpec(place, target, int(rng.integers(1 << 30)) if not bits else int(rng.integers(bits)),
                                 kind, int(rng.integers(1 << 30))))
    return out


def _qparams(rng: np.random.Generator, channels: int, bits: int) -> list[tuple[int, ...]]:
    """Random ``(bias, multiplier, shift, zero_point, act_min, act_max)`` per channel: a Q31
    multiplier in [2**30, 2**31), shifts that keep most outputs inside the ``bits`` range; one
    zero point and clamp per trial (ReLU in a quarter of them)."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    zp = int(rng.integers(-8, 9))
    act_min = zp if rng.random() < 0.25 else lo
    return [(int(rng.integers(-(1 << 12), 1 << 12)), int(rng.integers(1 << 30, 1 << 31)), int(rng.integers(6, 11)),
             zp, act_min, hi) for _ in range(channels)]


def _requantised(acc: np.ndarray, qparams: list[tuple[int, ...]], bits: int) -> np.ndarray:
    """``acc`` (``m x n``) through the JAX output stage, channel ``j`` with ``qparams[j]`` (the
    zero point and clamp bounds of channel 0 for all)."""
    from workloads import output_stage
    from workloads.ops import Requant

    bias, mult, shift, zp, act_min, act_max = zip(*qparams, strict=True)
    rq = Requant(multiplier=mult, shift=shift, bias=bias, zero_point=zp[0], act_min=act_min[0], act_max=act_max[0],
                 bits=bits)
    return np.asarray(output_stage(acc, rq), dtype=np.int64)


def _golden(a: np.ndarray, b: np.ndarray, acc_bits: int) -> np.ndarray:
    """``A @ B`` by JAX with exact int32 accumulation, as int64 wrapped to ``acc_bits``."""
    import jax.numpy as jnp

    product = np.asarray(jnp.matmul(jnp.asarray(a, jnp.int32), jnp.asarray(b, jnp.int32),
                                    preferred_element_type=jnp.int32), dtype=np.int64)
    mask = (1 << acc_bits) - 1
    wrapped = product & mask
    return np.where(wrapped >> (acc_bits - 1), wrapped - (1 << acc_bits), wrapped)


def run_campaign(config: ArrayConfig, *, places: tuple[str, ...] | list[str] = tuple(PLACES),
                 faults_per_place: int | dict[str, int] = 50, clean_runs: int = 20, seed: int = 0,
                 work_dir: Path | None = None) -> CampaignResult:
    """Run the campaign on ``config`` (module docstring).

    Args:
        config: the design (small: every trial is simulated in Python). ``acc_bits`` must be 32
            (the golden product accumulates in int32).
        places: names of :data:`PLACES`.
        faults_per_place: faults per place, 1 .. ``MAX_FAULTS_PER_PLACE``; or that per place name.
        clean_runs: fault-free trials (false-alarm check), >= 0.
        seed: seeds the faults, sizes and operands.
        work_dir: the simulator build cache (default ``accel_dse.simulate``'s).

    Raises:
        ConfigError: an unknown place, a count out of bounds, ``acc_bits`` other than 32.
    """
    places = check_places(tuple(places))
    if isinstance(faults_per_place, dict):
        check_places(tuple(faults_per_place))
        faults_per_place = {p: check_faults(faults_per_place.get(p, 0)) for p in places}
    else:
        check_faults(faults_per_place)
    if isinstance(clean_runs, bool) or not isinstance(clean_runs, int) or clean_runs < 0:
        raise ConfigError(f"clean runs must be a non-negative integer, not {clean_runs!r}")
    if config.acc_bits != 32:
        raise ConfigError(f"the campaign's golden product accumulates in int32: acc_bits must be 32, not "
                          f"{config.acc_bits}")
    from accel_dse.sdc._sim import Trial, simulate_trials

    faults: list[FaultSpec | None] = list(draw_faults(config, places, faults_per_place, seed))
    faults += [None] * clean_runs
    rng = np.random.default_rng(seed + 1)
    order = rng.permutation(len(faults))
    trials = []
    lo, hi = -(1 << (config.input_bits - 1)), 1 << (config.input_bits - 1)
    for i in order:
        m, k, n = _dims(rng, config)
        a, b = rng.integers(lo, hi, (m, k)), rng.integers(lo, hi, (k, n))
        trials.append(Trial(a, b, _qparams(rng, n, config.input_bits), faults[i]))
    outcomes = simulate_trials(config, trials, work_dir=work_dir)
    result = CampaignResult(config, {p: PlaceTally() for p in places})
    for trial, got in zip(trials, outcomes, strict=True):
        raw = _golden(trial.a, trial.b, config.acc_bits)
        wrong = not (np.array_equal(got.raw, raw)
                     and np.array_equal(got.q, _requantised(raw, trial.qparams, config.input_bits)))
        fault, flagged = trial.fault, got.flagged
        if fault is None:
            if wrong:
                raise ConfigError(f"fault-free run of {trial.a.shape[0]}x{trial.a.shape[1]}x{trial.b.shape[1]} on "
                                  f"{config.short_name()} differs from the golden result (an RTL bug)")
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
