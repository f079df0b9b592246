"""Many sweep workers on one PostgreSQL study: errors, trials/s and lock waits (prints figures).

Starts a throwaway PostgreSQL cluster (``initdb`` of the Debian ``postgresql`` package, as the
``postgres`` user when run as root; bound to 127.0.0.1 on a free port, ``fsync=off``), then
``--workers`` separate ``accel-dse sweep`` processes (``--jobs 1`` each, as on as many
machines) on one study, each stopped by ``--timeout``. Afterwards it prints:

* **errors** (target 0): workers that exited non-zero, ``error`` / ``Traceback`` lines on their
  stderr, FAIL trials other than a design's own (``infeasible``, ``overflow``, ``invalid``) and
  trials left RUNNING or WAITING;
* **trials/s**: COMPLETE trials over the steady window (from the moment the last worker began
  its first trial to the moment the first one finished its last), in all and per worker; and
  over the whole run (first trial start to last trial end, start-up excluded);
* **lock waits**, three ways: (1) lock waits longer than ``deadlock_timeout`` (100 ms), counted
  from the server log (``log_lock_waits = on``: one "still waiting" line each), by lock, object
  and waiting statement, and how long those that ended took; (2) the
  database's sessions waiting on a heavyweight lock (``pg_stat_activity.wait_event_type =
  'Lock'``), sampled every 0.2 s: samples with any, the peak, the mean; the peak of
  ``pg_locks`` entries not granted; (3) ``pg_stat_database``: deadlocks, commits and rollbacks
  of the run. Also the peak of connections to the database.

Usage: ``.venv/bin/python bench/postgres_workers.py [--workers 24] [--seconds 30] [--sampler tpe]``
(``--seconds 30`` took 107 s on 2 shared cores: the 24 workers' start-up, ~2 s of CPU each, comes
first: trials ran during 37 s of it; ``--keep-log FILE`` keeps the server log).
Needs the ``postgresql`` server package and psycopg (``pip install -e '.[postgres]'``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import optuna
from optuna.trial import TrialState

#: Statuses of FAIL trials that are a design's own outcome, not an error of the machinery.
DESIGN_FAILS = {"infeasible", "overflow", "invalid"}
SAMPLE_S = 0.2


def _pg_bin() -> Path:
    for version in ("15", "16", "17", "14", "13"):
        path = Path(f"/usr/lib/postgresql/{version}/bin")
        if (path / "initdb").is_file() and (path / "pg_ctl").is_file():
            return path
    raise SystemExit("PostgreSQL server binaries not found: apt-get install -y postgresql")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def pg_cluster() -> Iterator[tuple[str, Path]]:
    """A throwaway cluster on 127.0.0.1: yields (database URL, server log); stopped and removed afterwards."""
    bindir = _pg_bin()
    root = Path(tempfile.mkdtemp(prefix="accel-dse-pgw-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        as_postgres = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres", "postgres")
    data, log, port = root / "data", root / "server.log", _free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*as_postgres, *cmd], check=True, capture_output=True, text=True, timeout=120)

    options = (f"-p {port} -k {root} -h 127.0.0.1 -c fsync=off -c log_lock_waits=on "
               "-c deadlock_timeout=100ms")
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", options, "start")
        run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "dse")
        yield f"postgresql://postgres@127.0.0.1:{port}/dse", log
    finally:
        with contextlib.suppress(Exception):
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


class LockSampler(threading.Thread):
    """Samples the database's sessions and ungranted locks every :data:`SAMPLE_S` s until stopped."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.stop = threading.Event()
        self.waiting: list[int] = []
        self.ungranted: list[int] = []
        self.connections: list[int] = []

    def stats(self) -> tuple[int, int, int]:
        """(deadlocks, commits, rollbacks) of the database so far."""
        row = self.conn.execute("SELECT deadlocks, xact_commit, xact_rollback FROM pg_stat_database "
                                "WHERE datname = current_database()").fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            waiting, total = self.conn.execute(
                "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
            (ungranted,) = self.conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
            self.waiting.append(int(waiting))
            self.connections.append(int(total))
            self.ungranted.append(int(ungranted))


def _worker(exe: str, url: str, out: Path, i: int, args: argparse.Namespace) -> list[str]:
    return [exe, "sweep", "--sampler", args.sampler, "--space", args.space, "--trials", "1000000",
            "--study", "many", "--storage", url, "--out-dir", str(out / f"w{i}"), "--seed", str(i),
            "--timeout", str(args.seconds), "--quiet"]


_WAIT = re.compile(r"still waiting for (\w+) on (\w+)")
_ACQUIRED = re.compile(r"acquired \w+ on \w+ .* after ([\d.]+) ms")
_STATEMENT = re.compile(r"STATEMENT:\s+(\w+)(.*)")
_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+(\w+)", re.IGNORECASE)


def _statement(line: str) -> str | None:
    """``SELECT studies FOR UPDATE``-style summary of a log's STATEMENT line (``None`` if it is not one)."""
    match = _STATEMENT.search(line)
    if match is None:
        return None
    table = _TABLE.search(match.group(0))
    lock = " FOR UPDATE" if "FOR UPDATE" in match.group(2).upper() else ""
    return f"{match.group(1).upper()} {table.group(1) if table else '?'}{lock}"


def _continued(lines: list[str], j: int) -> list[str]:
    """The lines after ``lines[j]`` that continue its entry (a multi-line statement: tab-indented)."""
    out = []
    for line in lines[j + 1:]:
        if not line.startswith(("\t", " ")):
            break
        out.append(line.strip())
    return out


def lock_waits(server_log: str) -> tuple[collections.Counter, list[float]]:
    """Lock waits over ``deadlock_timeout`` in the server log, by (lock, object, statement); and the
    waits that ended, ms."""
    kinds: collections.Counter = collections.Counter()
    lines = server_log.splitlines()
    for i, line in enumerate(lines):
        wait = _WAIT.search(line)
        if wait is None:
            continue
        after = range(i + 1, min(i + 4, len(lines)))
        statement = next((_statement(" ".join([lines[j], *_continued(lines, j)])) for j in after
                          if "STATEMENT:" in lines[j]), "?")
        kinds[f"{wait.group(1)} on {wait.group(2)} ({statement})"] += 1
    return kinds, [float(m.group(1)) for m in map(_ACQUIRED.search, lines) if m]


def _rate(trials: list[optuna.trial.FrozenTrial], start: datetime, end: datetime) -> tuple[int, float]:
    n = sum(1 for t in trials if start <= t.datetime_complete <= end)
    return n, n / max((end - start).total_seconds(), 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=30.0, help="each worker's --timeout")
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--space", default="edge-int8")
    parser.add_argument("--accel-dse", default=str(Path(sys.executable).parent / "accel-dse"))
    parser.add_argument("--keep-log", default=None, metavar="FILE", help="copy the server log here")
    args = parser.parse_args()

    with pg_cluster() as (url, log), tempfile.TemporaryDirectory() as tmp:
        sampler = LockSampler(url)
        before = sampler.stats()
        sampler.start()
        t0 = time.monotonic()
        procs = [subprocess.Popen(_worker(args.accel_dse, url, Path(tmp), i, args), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for i in range(args.workers)]
        stderr = [p.communicate()[1] for p in procs]
        wall = time.monotonic() - t0
        sampler.stop.set()
        sampler.join()
        after = sampler.stats()
        sampler.conn.close()
        study = optuna.load_study(study_name="many", storage=url)
        trials = study.get_trials(deepcopy=False)
        server_log = log.read_text(errors="replace")
        if args.keep_log:
            Path(args.keep_log).write_text(server_log)

    states = collections.Counter(t.state.name for t in trials)
    fail_status = collections.Counter(t.user_attrs.get("status", "?") for t in trials if t.state == TrialState.FAIL)
    bad_exit = [(i, p.returncode) for i, p in enumerate(procs) if p.returncode != 0]
    err_lines = [line for text in stderr for line in text.splitlines()
                 if re.search(r"error|Traceback", line, re.IGNORECASE)]
    machinery_fails = sum(n for s, n in fail_status.items() if s not in DESIGN_FAILS)
    stuck = states.get("RUNNING", 0) + states.get("WAITING", 0)
    errors = len(bad_exit) + len(err_lines) + machinery_fails + stuck

    print(f"{args.workers} `accel-dse sweep --sampler {args.sampler} --space {args.space} --timeout "
          f"{args.seconds:g}` processes on one PostgreSQL study; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; wall {wall:.1f} s")
    print(f"trials: {len(trials)} ({', '.join(f'{k} {v}' for k, v in sorted(states.items()))}); "
          f"FAIL by status: {dict(fail_status) or 'none'}")
    print(f"errors: {errors} (target 0): {len(bad_exit)} workers exited non-zero {bad_exit or ''}, "
          f"{len(err_lines)} error lines on stderr, {machinery_fails} FAIL trials not a design's own, "
          f"{stuck} left RUNNING/WAITING")
    for line in err_lines[:5]:
        print(f"  stderr: {line}")
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    if done:
        per_pid: dict[object, list[optuna.trial.FrozenTrial]] = collections.defaultdict(list)
        for t in done:
            per_pid[t.user_attrs.get("pid")].append(t)
        steady_start = max(min(t.datetime_start for t in ts) for ts in per_pid.values())
        steady_end = min(max(t.datetime_complete for t in ts) for ts in per_pid.values())
        first = min(t.datetime_start for t in done)
        last = max(t.datetime_complete for t in done)
        n_all, rate_all = _rate(done, first, last)
        print(f"workers with a COMPLETE trial: {len(per_pid)} of {args.workers}")
        if steady_end > steady_start:
            n, rate = _rate(done, steady_start, steady_end)
            print(f"trials/s, all {len(per_pid)} workers running: {rate:.1f} ({rate / len(per_pid):.2f} per worker; "
                  f"{n} trials in {(steady_end - steady_start).total_seconds():.1f} s)")
        print(f"trials/s, first trial start to last trial end: {rate_all:.1f} ({n_all} trials in "
              f"{(last - first).total_seconds():.1f} s)")
    kinds, ended = lock_waits(server_log)
    deadlocks_logged = server_log.count("deadlock detected")
    samples = len(sampler.waiting)
    print(f"lock waits > 100 ms (server log, log_lock_waits): {sum(kinds.values())}; deadlocks in the log: "
          f"{deadlocks_logged}")
    for kind, n in kinds.most_common(5):
        print(f"  {n:5d}  {kind}")
    if ended:
        print(f"  of these, {len(ended)} ended with the lock acquired after a median {statistics.median(ended):.0f} ms "
              f"(max {max(ended):.0f} ms)")
    if samples:
        print(f"sessions waiting on a lock (pg_stat_activity, {samples} samples every {SAMPLE_S:g} s): "
              f"any in {sum(1 for w in sampler.waiting if w)} samples, peak {max(sampler.waiting)}, mean "
              f"{statistics.mean(sampler.waiting):.2f}; ungranted pg_locks peak {max(sampler.ungranted)}; "
              f"connections peak {max(sampler.connections)}")
    print(f"pg_stat_database: deadlocks {after[0] - before[0]}, rollbacks {after[2] - before[2]}, commits "
          f"{after[1] - before[1]} (the sampler's own {2 * samples + 1} autocommit statements included)")


if __name__ == "__main__":
    main()
