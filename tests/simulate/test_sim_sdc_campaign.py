"""The SDC campaign's bench (cocotb + Verilator, 2 x 3 designs, one build per design for the module):
a fault in each protected place (PE operand, weight and shadow, partial sum, output stage) is
detected on WS and IS and corrupts the output; fault-free trials are exact and silent; the same
faults pass silently on the unprotected design; SRAM and DMA faults are escapes; bad campaign
input is one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accel_dse.sdc._sim import Trial, simulate_trials
from accel_dse.sdc.campaign import run_campaign
from accel_dse.sdc.places import PLACES, FaultSpec
from accel_spec.config import ArrayConfig

REPO = Path(__file__).resolve().parents[2]


def _config(flow: str, checksum: str = "detect") -> ArrayConfig:
    return ArrayConfig(rows=2, cols=3, dataflow=flow, checksum=checksum)


def _trial(rng: np.random.Generator, fault: FaultSpec | None) -> Trial:
    # operands in [1, 63]: no zero, bit 6 clear, so a stuck-at-1 on bit 6 changes every operand it holds;
    # a scale of 2**-11 keeps every output in [0, 15], so bit 6 of q is 0 and stuck at 1 corrupts it
    a, b = rng.integers(1, 64, (5, 4)), rng.integers(1, 64, (4, 7))
    return Trial(a, b, [(0, 1 << 30, 10, 0, -128, 127)] * 7, fault)


PROTECTED = [FaultSpec("pe_psum", (1, 1, "v"), 20, "stuck1", 0),
             FaultSpec("pe_weight", (1, 2, "s"), 6, "stuck1", 0),
             FaultSpec("pe_weight", (0, 1, "w"), 6, "stuck1", 0),
             FaultSpec("pe_operand", (1, 0, "a"), 6, "stuck1", 0),
             FaultSpec("output_stage", ("q",), 6, "stuck1", 0)]


def _by_hand(trial: Trial) -> tuple[np.ndarray, np.ndarray]:
    """``A @ B`` on Python integers (at most 4 x 63 x 63 = 15,876: no 32-bit wrap) and its int8
    outputs: ``((acc + bias) * multiplier + 2**(30 + shift)) >> (31 + shift)`` (rounded to nearest,
    ties up), plus the zero point, clamped."""
    a, b = trial.a.tolist(), trial.b.tolist()
    raw = np.array([[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))]
                    for i in range(len(a))], dtype=np.int64)
    q = np.zeros_like(raw)
    for (i, j), acc in np.ndenumerate(raw):
        bias, mult, shift, zp, lo, hi = trial.qparams[j]
        y = ((int(acc) + bias) * mult + (1 << (30 + shift))) >> (31 + shift)
        q[i, j] = min(max(y + zp, lo), hi)
    return raw, q


def _correct(config: ArrayConfig, trial: Trial, got) -> bool:  # type: ignore[no-untyped-def]
    assert config.acc_bits >= 32  # the sums above fit
    raw, q = _by_hand(trial)
    return np.array_equal(got.raw, raw) and np.array_equal(got.q, q)


def test_the_trials_outputs_by_hand():
    """The by-hand reference on one worked case: 4 x (63 x 63) = 15,876 -> round(15,876 / 2**11) = 8."""
    trial = Trial(np.full((1, 4), 63), np.full((4, 1), 63), [(0, 1 << 30, 10, 0, -128, 127)], None)
    raw, q = _by_hand(trial)
    assert raw.tolist() == [[15876]] and q.tolist() == [[8]]
    rng = np.random.default_rng(3)
    raw, q = _by_hand(_trial(rng, None))
    assert 0 <= q.min() and q.max() <= 15 and len(np.unique(q)) > 1  # bit 6 of every output is 0


@pytest.mark.parametrize("flow", ["ws", "is"])
def test_a_fault_in_each_protected_place_is_detected_and_missed_without_the_checksum(flow, sim_cache):
    assert {f.place for f in PROTECTED} == {p for p, place in PLACES.items() if place.protected}
    rng = np.random.default_rng(3)
    trials = [_trial(rng, f) for f in [None, *PROTECTED, None]]
    for checksum in ("detect", "none"):
        config = _config(flow, checksum)
        outcomes = simulate_trials(config, trials, work_dir=sim_cache)
        for trial, got in zip(trials, outcomes, strict=True):
            if trial.fault is None:
                assert _correct(config, trial, got) and not got.flagged
                continue
            assert not _correct(config, trial, got), trial.fault  # the fault corrupted the output ...
            assert got.flagged == (checksum == "detect"), trial.fault  # ... and only the checked design saw it
            if trial.fault.place == "output_stage" and checksum == "detect":
                assert got.qsdc and not got.sdc  # by the output stage's check, after the run's checksum passed


def test_sram_and_dma_faults_are_escapes(sim_cache):
    result = run_campaign(_config("ws"), places=("operand_buffer", "ofmap_buffer", "dma"), faults_per_place=12,
                          clean_runs=3, seed=2, work_dir=sim_cache)
    assert result.clean_runs == 3 and result.false_alarms == 0
    for place, tally in result.tallies.items():
        assert not PLACES[place].protected
        assert tally.injected == 12 and tally.corrupted >= 1, place
        assert tally.detected == 0 and tally.escapes == tally.corrupted, place


@pytest.mark.parametrize("args, words", [(["--faults", "5001"], "faults per place"),
                                         (["--places", "pe_operand,alu"], "'alu'"),
                                         (["--faults-at", "output_stage=9000"], "faults per place")])
def test_bad_campaign_input_is_one_line_and_exit_2(args, words):
    done = subprocess.run([sys.executable, str(REPO / "bench" / "sdc_campaign.py"), *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and words in done.stderr, done.stderr
