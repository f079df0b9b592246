"""SIGTERM during a sweep's evaluation ends it within moments, 130, and leaves a study that resumes.

The sweep's handler used to raise ``KeyboardInterrupt`` during an evaluation; raised inside a
finaliser (JAX's garbage-collection callback) it was printed as "Exception ignored" and lost. The
stand-in model here spends its held evaluation in one finaliser after another. The bound is the
rule's 2 s plus slack for a loaded machine: it bounds a hang, it does not time anything.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState
from search_testlib import HERE, make_space, standin_evaluator

from accel_dse.search import SweepConfig, open_storage, parse_storage, run_sweep

#: The rule's 2 s, plus slack for a machine whose cores other jobs share.
BOUND_S = 2.0 + 4.0


def _held(markers, proc, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not list(markers.glob("*-3")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the sweep never reached its held evaluation"
        time.sleep(0.05)
    time.sleep(0.3)  # well inside the finalisers


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_in_an_evaluation_finaliser_ends_the_sweep_and_it_resumes(tmp_path, subprocess_env, sig):
    url = f"sqlite:///{tmp_path}/study.db"
    markers = tmp_path / "calls"
    markers.mkdir()
    env = dict(subprocess_env, STANDIN_MARKER_DIR=str(markers), STANDIN_HANG_AT="3", STANDIN_HANG_IN_FINALISER="1",
               STANDIN_DELAY_S="0")
    proc = subprocess.Popen([sys.executable, str(HERE / "search_testlib.py"), url, "--cli", str(tmp_path / "s.toml"),
                             "--trials", "50", "--sampler", "random"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _held(markers, proc)
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {BOUND_S} s after {signal.Signals(sig).name}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "run the same command to resume" in err, err
    assert "Exception ignored" not in err and "Traceback" not in err, err
    storage = open_storage(parse_storage(url), heartbeat_interval=None)
    trials = optuna.load_study(study_name="k", storage=storage).get_trials()
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    stopped = [t for t in trials if t.user_attrs.get("status") == "interrupted"]
    assert len(stopped) == 1 and stopped[0].state == TrialState.FAIL
    assert stopped[0].user_attrs["config_hash"]  # what the trial knew is recorded with it
    finished = {t.number: t.values for t in trials if t.state == TrialState.COMPLETE}
    # Resume: the same study takes more trials; the finished ones are untouched.
    space = make_space()
    result = run_sweep(SweepConfig(space=space, evaluator=standin_evaluator(space), storage=url, study_name="k",
                                   sampler="random", n_trials=len(trials) + 2, seed=1))
    after = result.study.get_trials()
    assert len(after) == len(trials) + 2
    assert {t.number: t.values for t in after if t.number in finished} == finished
    assert all(t.state == TrialState.COMPLETE for t in after[len(trials):])


#: The CLI's sweep on the stand-in model, with the arguments after the script's name.
CLI_SWEEP = """import sys
import accel_dse.cli.sweep as sweep_cli
from accel_dse.cli import main
from search_testlib import standin_evaluator

sweep_cli._evaluator = lambda space: standin_evaluator(space)
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_the_grid_is_scored_writes_no_table(tmp_path, subprocess_env):
    from search_testlib import SMALL_SPACE_TOML

    (tmp_path / "s.toml").write_text(SMALL_SPACE_TOML)
    (tmp_path / "grid.npz").write_bytes(b"the old table")
    markers = tmp_path / "calls"
    markers.mkdir()
    env = dict(subprocess_env, STANDIN_MARKER_DIR=str(markers), STANDIN_HANG_AT="1", STANDIN_HANG_IN_FINALISER="1")
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI_SWEEP, "sweep", "--space", str(tmp_path / "s.toml"), "--sampler", "grid",
         "--storage", f"sqlite:///{tmp_path}/study.db", "--study", "k", "--quiet", "--force",
         "--grid-table", str(tmp_path / "grid.npz")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not list(markers.iterdir()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the grid was never scored"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {BOUND_S} s after SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "run the same command to resume" in err and "Traceback" not in err, err
    assert (tmp_path / "grid.npz").read_bytes() == b"the old table"
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("study.db"))  # -wal, -shm: SQLite's
    assert left == ["calls", "grid.npz", "s.toml"]
    storage = open_storage(parse_storage(f"sqlite:///{tmp_path}/study.db"), heartbeat_interval=None)
    assert optuna.load_study(study_name="k", storage=storage).get_trials() == []


def test_the_grid_table_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """A write that fails, or a stop while it writes, leaves the old table and no hidden file."""
    from accel_dse.exit_cleanup import clean_up_for_stop
    from accel_dse.search.scoring import grid

    space = make_space()
    table = tmp_path / "grid.npz"
    table.write_bytes(b"the old table")
    real = grid.np.savez_compressed

    def half_then(error):
        def write(file, **arrays):
            handle = open(file, "wb") if isinstance(file, (str, os.PathLike)) else file  # noqa: SIM115
            handle.write(b"PK half a table")
            handle.flush()
            if error is KeyboardInterrupt:
                clean_up_for_stop()  # what the signal watcher does before the process ends
            raise error
        return write

    for error in (OSError(28, "No space left on device"), KeyboardInterrupt):
        monkeypatch.setattr(grid.np, "savez_compressed", half_then(error))
        with pytest.raises(Exception if isinstance(error, OSError) else KeyboardInterrupt) as info:
            grid.grid_search(space, standin_evaluator(space), table=table)
        if isinstance(error, OSError):
            assert "cannot write grid table" in str(info.value) and "No space left" in str(info.value)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.npz"]
        assert table.read_bytes() == b"the old table"
    monkeypatch.setattr(grid.np, "savez_compressed", real)
    result = grid.grid_search(space, standin_evaluator(space), table=table)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.npz"]
    assert len(grid.np.load(table)["index"]) == result.size
