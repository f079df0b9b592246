"""Several processes: --jobs on journal storage, kill -9 then resume, SIGTERM, PostgreSQL.

Workers run ``search_testlib.py`` (the stand-in model, ``STANDIN_DELAY_S`` seconds per design)
as real subprocesses; the test opens the same storage to watch and check the study.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState
from search_testlib import HERE, make_space, standin_evaluator

from accel_dse.search import SweepConfig, open_storage, parse_storage, run_sweep

SCRIPT = str(HERE / "search_testlib.py")
N_FREE = len(make_space().free_params)


def _study(url: str) -> optuna.Study | None:
    storage = open_storage(parse_storage(url), heartbeat_interval=None)
    if "k" not in optuna.get_all_study_names(storage):
        return None
    return optuna.load_study(study_name="k", storage=storage)


def _start(url: str, env: dict[str, str], *args: str, delay: float = 0.3, hang_at: int | None = None
           ) -> subprocess.Popen:
    env = dict(env, STANDIN_DELAY_S=str(delay))
    if hang_at is not None:
        env["STANDIN_HANG_AT"] = str(hang_at)
    return subprocess.Popen([sys.executable, SCRIPT, url, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_mid_trial(url: str, proc: subprocess.Popen, *, completes: int, timeout: float = 90) -> FrozenTrial:
    """Wait until ``proc`` has ``completes`` COMPLETE trials and is inside its next design's evaluation."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"worker ended early ({proc.returncode}): {proc.stderr.read()}")
        study = _study(url)
        if study is not None:
            trials = study.get_trials(deepcopy=False)
            done = [t for t in trials if t.state == TrialState.COMPLETE]
            # All its parameters recorded: the design is drawn and being evaluated (the stand-in sleeps).
            mine = [t for t in trials if t.state == TrialState.RUNNING and t.user_attrs.get("pid") == proc.pid
                    and len(t.params) == N_FREE]
            if len(done) >= completes and mine:
                return mine[0]
        time.sleep(0.05)
    raise AssertionError("the worker never reached the middle of a trial")


def _snapshot(study: optuna.Study) -> dict[int, tuple]:
    return {t.number: (t.params, t.values) for t in study.get_trials() if t.state == TrialState.COMPLETE}


def _check_after_kill(study: optuna.Study, before: dict[int, tuple], killed: int) -> None:
    trials = study.get_trials()
    now = {t.number: (t.params, t.values) for t in trials if t.state == TrialState.COMPLETE}
    for number, record in before.items():
        assert now[number] == record  # every previously COMPLETE trial is still there, unchanged
    assert trials[killed].state == TrialState.FAIL
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed]
    assert len(retries) == 1 and retries[0].state == TrialState.COMPLETE
    assert retries[0].params == trials[killed].params
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    numbers = [t.number for t in trials]
    assert numbers == list(range(len(numbers)))


@pytest.mark.parametrize("scheme", ["journal", "sqlite"])
def test_kill_9_mid_trial_then_resume_loses_nothing(tmp_path, subprocess_env, monkeypatch, scheme):
    url = f"journal:{tmp_path}/study.journal" if scheme == "journal" else f"sqlite:///{tmp_path}/study.db"
    # The worker's fourth evaluation never returns, so the trial seen running is still running when
    # SIGKILL lands (with a short sleep, a loaded machine let it complete first).
    proc = _start(url, subprocess_env, "--sampler", "tpe", "--trials", "40", "--seed", "1", hang_at=4)
    victim = _wait_mid_trial(url, proc, completes=3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    study = _study(url)
    before = _snapshot(study)
    assert study.get_trials()[victim.number].state == TrialState.RUNNING  # nobody cleaned it up yet
    space = make_space()
    result = run_sweep(SweepConfig(space=space, evaluator=standin_evaluator(space), storage=url, study_name="k",
                                   n_trials=len(before) + 4, seed=2))
    assert result.recovered == [victim.number]
    trials = result.study.get_trials()
    assert trials[victim.number].user_attrs["status"] == "worker died"
    _check_after_kill(result.study, before, victim.number)
    counted = [t for t in trials if t.number != victim.number]
    assert len(counted) == len(before) + 4


def test_two_jobs_on_journal_storage_lose_and_duplicate_no_trial(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_DELAY_S", "0.02")
    url = f"journal:{tmp_path}/study.journal"
    space = make_space()
    result = run_sweep(SweepConfig(space=space, evaluator=standin_evaluator(space), storage=url, study_name="k",
                                   sampler="tpe", n_trials=40, jobs=2, seed=3))
    trials = result.study.get_trials()
    numbers = [t.number for t in trials]
    assert numbers == list(range(len(trials)))  # no number lost, none duplicated
    assert 40 <= len(trials) <= 41  # the two workers may overshoot the budget by one in a race
    assert all(t.state in (TrialState.COMPLETE, TrialState.FAIL) for t in trials)
    pids = {t.user_attrs["pid"] for t in trials}
    assert len(pids) == 2 and os.getpid() not in pids  # two worker processes did the work
    ids = [t._trial_id for t in trials]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(("jobs", "signum"), [(1, signal.SIGTERM), (2, signal.SIGTERM), (1, signal.SIGHUP)])
def test_sigterm_fails_the_running_trial_and_exits_130(tmp_path, subprocess_env, jobs, signum):
    url = f"journal:{tmp_path}/study.journal"
    # Each worker's third evaluation never returns (until the signal), so the trial seen running is
    # still running when the signal lands (with a 1 s sleep, a loaded machine let it complete first).
    markers = tmp_path / "calls"
    markers.mkdir()
    proc = _start(url, dict(subprocess_env, STANDIN_MARKER_DIR=str(markers)), "--cli", str(tmp_path / "small.toml"),
                  "--trials", "200", "--jobs", str(jobs), "--sampler", "random", delay=0.3, hang_at=3)
    victim = _wait_held(url, proc, markers, jobs)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "run the same command to resume" in err
    assert "Traceback" not in err
    trials = _study(url).get_trials()
    assert trials[victim].state == TrialState.FAIL
    assert trials[victim].user_attrs["status"] == "interrupted"
    assert not [t for t in trials if t.state == TrialState.RUNNING]


def _wait_held(url: str, proc: subprocess.Popen, markers: Path, jobs: int, timeout: float = 90) -> int:
    """The newest trial running once each of the ``jobs`` workers is inside its held (third) evaluation:
    every trial running then is held, whatever the trials before it were (a random design may fail
    without an evaluation, so trials and evaluations need not count alike)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"worker ended early ({proc.returncode}): {proc.stderr.read()}")
        if len(list(markers.glob("*-3"))) >= jobs:
            running = [t for t in _study(url).get_trials(deepcopy=False)
                       if t.state == TrialState.RUNNING and len(t.params) == N_FREE]
            if len(running) == jobs:
                return max(running, key=lambda t: t.datetime_start).number
        time.sleep(0.05)
    raise AssertionError("the workers never reached their held evaluation")


# -- PostgreSQL ------------------------------------------------------------------------------
def _pg_bin() -> Path | None:
    for version in ("15", "16", "17", "14", "13"):
        path = Path(f"/usr/lib/postgresql/{version}/bin")
        if (path / "initdb").is_file() and (path / "pg_ctl").is_file():
            return path
    return None


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def postgres_url(tmp_path):
    """A throwaway PostgreSQL cluster on 127.0.0.1 (a free port), stopped and removed afterwards."""
    import shutil
    import tempfile

    bindir = _pg_bin()
    if bindir is None:
        message = "PostgreSQL server binaries not found (apt-get install postgresql)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    as_postgres: list[str] = []
    data_root = Path(tempfile.mkdtemp(prefix="accel-dse-pg-"))
    if os.geteuid() == 0:
        as_postgres = ["runuser", "-u", "postgres", "--"]
        shutil.chown(data_root, "postgres", "postgres")
    data = data_root / "data"
    port = _free_port()
    log = data_root / "server.log"

    def run(*cmd: str) -> None:
        subprocess.run([*as_postgres, *cmd], check=True, capture_output=True, text=True, timeout=120)

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o",
            f"-p {port} -k {data_root} -h 127.0.0.1 -c fsync=off", "start")
        run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "dse")
        yield f"postgresql://postgres@127.0.0.1:{port}/dse"
    finally:
        with contextlib.suppress(Exception):
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(data_root, ignore_errors=True)


@pytest.mark.postgres
def test_postgresql_two_workers_one_killed(postgres_url, subprocess_env):
    url = postgres_url
    # The slow worker's fourth evaluation never returns, so the trial seen running is still running
    # when SIGKILL lands (without it, a loaded machine let that trial complete first: the test flaked).
    slow = _start(url, subprocess_env, "--sampler", "tpe", "--trials", "40", "--heartbeat", "1", "--seed", "1",
                  delay=0.4, hang_at=4)
    _wait_mid_trial(url, slow, completes=1)  # the study exists before the second worker starts
    fast = _start(url, subprocess_env, "--sampler", "tpe", "--trials", "40", "--heartbeat", "1", "--seed", "2",
                  delay=0.15)
    _wait_mid_trial(url, fast, completes=4)
    victim = _wait_mid_trial(url, slow, completes=4)
    slow.send_signal(signal.SIGKILL)
    slow.wait()
    held = [t.number for t in _study(url).get_trials()
            if t.state == TrialState.RUNNING and t.user_attrs.get("pid") == slow.pid]
    assert held == [victim.number]  # nobody else fails it within the heartbeat's grace period
    before = _snapshot(_study(url))
    out, err = fast.communicate(timeout=180)
    assert fast.returncode == 0, err
    study = _study(url)
    _check_after_kill(study, before, victim.number)
    trials = study.get_trials()
    # The survivor's heartbeat check (not a restart) failed the dead worker's trial and re-ran it.
    retry = next(t for t in trials if t.system_attrs.get("failed_trial") == victim.number)
    assert retry.user_attrs["pid"] == fast.pid
    assert "status" not in trials[victim.number].user_attrs or trials[victim.number].user_attrs["status"] != "ok"
    pids = {t.user_attrs.get("pid") for t in trials if t.state == TrialState.COMPLETE}
    assert pids == {slow.pid, fast.pid}


def _zombie_then_resume(url: str, env: dict[str, str]) -> None:
    """A worker killed right after creating a trial (before the sampler, the objective or a heartbeat ran)."""
    proc = _start(url, env, "--sampler", "tpe", "--trials", "40", "--seed", "1", "--stall-after", "3",
                  "--heartbeat", "10", delay=0.01)
    line = proc.stdout.readline()
    assert line.startswith("stalled"), proc.stderr.read()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    study = _study(url)
    zombie = [t for t in study.get_trials() if t.state == TrialState.RUNNING]
    assert len(zombie) == 1 and not zombie[0].params  # killed before the design was drawn
    before = _snapshot(study)
    space = make_space()
    # Resumed at once: the 20 s grace period of the heartbeat has not passed, only the owner tells.
    result = run_sweep(SweepConfig(space=space, evaluator=standin_evaluator(space), storage=url, study_name="k",
                                   n_trials=len(before) + 3, seed=2))
    assert result.recovered == [zombie[0].number]
    trials = result.study.get_trials()
    assert trials[zombie[0].number].user_attrs["status"] == "worker died"
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert len([t for t in trials if t.state == TrialState.COMPLETE]) == len(before) + 3
    retry = [t for t in trials if t.system_attrs.get("failed_trial") == zombie[0].number]
    assert len(retry) == 1 and retry[0].user_attrs["pid"] == os.getpid()  # not the dead worker's attributes


@pytest.mark.parametrize("scheme", ["journal", "sqlite"])
def test_trial_killed_as_it_is_created_is_failed_and_retried_on_resume(tmp_path, subprocess_env, scheme):
    url = f"journal:{tmp_path}/study.journal" if scheme == "journal" else f"sqlite:///{tmp_path}/study.db"
    _zombie_then_resume(url, subprocess_env)


@pytest.mark.postgres
def test_postgresql_trial_killed_as_it_is_created_is_failed_and_retried(postgres_url, subprocess_env):
    _zombie_then_resume(postgres_url, subprocess_env)
