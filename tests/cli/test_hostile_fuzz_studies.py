"""Seeded fuzzing of studies: NaN, infinities and garbage in trial and study attributes.

A study is written by accel-dse, but also by older versions, other tools and people (Optuna's API,
the dashboard). Starting from a small model-only sweep, each case adds a trial that is the best
with one to three of its attributes replaced by garbage (NaN, infinities, 1e308, huge integers,
strings with escapes, lists, tables, ``None``; at the top level or inside ``config``, ``metrics``
and ``workloads``), and may replace the study's own records (a verify record, the best-feasible
marker, the objectives) likewise. ``report`` (text and ``--json``), ``verify`` and ``export
--trial best`` then read it; each must exit 0 or 2 (``verify`` also 1: a design that failed),
never print a traceback, print one line on exit 2, and bound its output. A value that cannot be
shown is "-" (issue 48). The simulation ``verify`` runs and the Verilog ``export`` writes are
stubbed (each would take seconds a case): what is fuzzed is the reading of the study.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from pathlib import Path
from typing import Any

import optuna
import pytest
from hostile_testlib import ERROR_PREFIX
from report_testlib import make_study

SEED = 48
CASES = 8

GARBAGE: list[Any] = [float("nan"), float("inf"), float("-inf"), 1e308, -1, 0, 10**30, "x" * 3000, "\x1b[2J\x07",
                      "nan", "", [], {}, None, True, [float("nan"), "a"], {"a": float("nan")}, "12.5"]
#: The attributes the commands read first (drawn twice as often as any other).
KEYS = ["config", "metrics", "workloads", "config_hash", "feasible", "status", "figure_model", "constraint_values"]
#: Study records replaced by garbage now and then.
STUDY_KEYS = ["accel_dse.best_feasible", "accel_dse.objectives"]


@pytest.fixture(scope="module")
def base_study(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("study")
    make_study(f"sqlite:///{folder / 'base.db'}", trials=4)
    return folder / "base.db"


def _copy_database(source: Path, target: Path) -> None:
    """A whole copy of the SQLite study (the sweep's storage may keep its last writes in the ``-wal``
    file beside it, which a copy of the main file alone loses)."""
    import sqlite3

    with sqlite3.connect(source) as a, sqlite3.connect(target) as b:
        a.backup(b)
    a.close()
    b.close()


def _garbled(value: Any, rng: random.Random) -> Any:
    """``value`` (a table: one of its entries, maybe deeper) or itself replaced by garbage."""
    if isinstance(value, dict) and value and rng.random() < 0.6:
        out = dict(value)
        key = rng.choice(sorted(out))
        out[key] = _garbled(out[key], rng)
        return out
    return copy.deepcopy(rng.choice(GARBAGE))


def _case(url: str, rng: random.Random) -> int:
    """Add a best trial with garbled attributes, and maybe garble the study's records; returns its number."""
    from accel_spec.config import ArrayConfig

    study = optuna.load_study(study_name="s", storage=url)
    best = study.best_trial
    attrs = dict(best.user_attrs)
    # Another design (a design found twice counts once: the copy would hide behind the original).
    config = dataclasses.replace(ArrayConfig.from_dict(attrs["config"]), clock_mhz=777.0)
    attrs["config"], attrs["config_hash"] = config.to_dict(), config.config_hash
    for _ in range(rng.randint(1, 3)):
        key = rng.choice([*KEYS, *KEYS, *sorted(attrs)])
        attrs[key] = _garbled(attrs.get(key), rng)
    study.add_trial(optuna.trial.create_trial(params=best.params, distributions=best.distributions,
                                              values=[best.values[0] / 2], user_attrs=attrs))
    number = study.trials[-1].number
    record = {"passed": True, "status": "pass", "rtl_cycles": 310, "reason": "", "scale": 1.0,
              "fpga": {"fmax_mhz": 120.5, "used": {"luts": 100}}}
    if rng.random() < 0.6:
        study.set_user_attr(f"accel_dse.verify.{number}", _garbled(record, rng))
    if rng.random() < 0.3:
        study.set_user_attr(rng.choice(STUDY_KEYS), _garbled(study.user_attrs.get("accel_dse.objectives"), rng))
    return number


def _check(code: int, out: str, err: str, argv: tuple[str, ...], codes: tuple[int, ...]) -> None:
    where = f"{argv}: exit {code}, stderr {err[-600:]!r}"
    assert code in codes, where
    assert "Traceback" not in out and "Traceback" not in err, where
    assert len(out.encode()) + len(err.encode()) <= 256 * 1024, where
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, where
        assert lines[0].startswith("{" if "--json" in argv else ERROR_PREFIX), where


def test_studies_with_nan_and_garbage_attributes(run_cli, tmp_path, monkeypatch, base_study):
    import rtl_gen
    from accel_dse import simulate as simulate_package
    from accel_spec.errors import SimulationError

    def no_simulation(*args: Any, **kwargs: Any) -> Any:
        raise SimulationError("stubbed: no simulation in this test")

    monkeypatch.setattr(simulate_package, "simulate", no_simulation)
    monkeypatch.setattr(rtl_gen, "to_verilog", lambda config, **kw: "module stub;\nendmodule\n")
    monkeypatch.setattr(rtl_gen, "system_verilog", lambda config, **kw: "module stub_axi;\nendmodule\n")
    rng = random.Random(SEED)
    exits: dict[int, int] = {}
    seen = 0
    for case in range(CASES):
        db = tmp_path / f"case{case}.db"
        _copy_database(base_study, db)
        url = f"sqlite:///{db}"
        number = _case(url, rng)
        target = tmp_path / f"out{case}"
        target.mkdir()
        study = ("--storage", url, "--study", "s")
        text = () if case % 2 else ("--json",)  # a report takes seconds: text and JSON by turns
        runs = [(("report", *study, "--out", str(target / "r"), *text), (0, 2)),
                (("verify", *study, "--top", "1", "--no-synth", "--simulator", "icarus", "--work-dir",
                  str(target / "sim")), (0, 1, 2)),
                (("export", *study, "--trial", "best", "--out", str(target / "e"), "--no-synth"), (0, 2))]
        for argv, codes in runs:
            code, out, err = run_cli(*argv)
            _check(code, out, err, (*argv, f"case {case}"), codes)
            exits[code] = exits.get(code, 0) + 1
            seen += f"trial {number}:" in err or f'"trial": {number},' in out or f"\n{number:>5}  " in out
    assert exits.get(0), exits
    assert seen, "the garbled trial was never the one read: the fuzzing does not reach it"
