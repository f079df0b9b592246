"""Bounded resources: --jobs has an upper bound; SIGTERM ends every worker, also while they start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from hostile_testlib import one_line

from tests.proc_testlib import children, session_members


def test_jobs_seed_and_heartbeat_bounds(run_cli, tmp_path):
    from accel_dse.search import max_jobs

    cores = os.cpu_count() or 1
    cases = [
        (("--jobs", str(max_jobs() + 1)), f"--jobs must be at most {max_jobs()} (4 x the {cores} CPU cores)"),
        (("--jobs", "1000"), "--jobs must be at most"),
        (("--seed", "4294967296"), "--seed must be an integer in [0, 4294967295]"),
        (("--seed", "4294967295", "--jobs", "2", "--storage", f"journal:{tmp_path}/j"),
         "--seed must be an integer in [0, 4294967294]"),
        (("--heartbeat", "100000"), "--heartbeat must be at most 3600 seconds"),
    ]
    for extra, expected in cases:
        storage = () if "--storage" in extra else ("--storage", "memory:")
        line = one_line(*run_cli("sweep", "--trials", "1", "--quiet", *storage, *extra))
        assert expected in line, (extra, line)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("when", ["starting", "running"])
def test_sigterm_ends_every_worker(tmp_path, cli_env, when):
    from accel_dse.search import max_jobs

    # starting: the most workers allowed, signalled while they spawn; running: three workers, each
    # past its imports and into trials (every one of the most allowed importing costs ~3 CPU-s each)
    jobs = max_jobs() if when == "starting" else min(3, max_jobs())
    proc = subprocess.Popen(
        [sys.executable, "-m", "accel_dse", "sweep", "--jobs", str(jobs), "--trials", "100000", "--sampler", "random",
         "--storage", f"journal:{tmp_path / 'study.journal'}", "--study", "w", "--quiet"],
        cwd=tmp_path, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        want = 1 if when == "starting" else jobs
        while len(children(proc.pid)) < want or (when == "running" and not _has_trials(tmp_path)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "interrupted" in err
        gone = time.monotonic() + 30
        while session_members(proc.pid) and time.monotonic() < gone:
            time.sleep(0.1)
        assert session_members(proc.pid) == []
    finally:
        if proc.poll() is None or session_members(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def _has_trials(folder) -> bool:
    """Whether the study's journal holds a few finished trials (SET_TRIAL_STATE_VALUES records)."""
    path = folder / "study.journal"
    return path.is_file() and path.read_bytes().count(b'"op_code":6') > 2
