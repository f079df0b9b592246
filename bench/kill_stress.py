"""Kill sweep workers at random moments, on several storages; count trials lost, stuck and duplicated.

For each storage: ``--kills`` times, start ``accel-dse sweep --sampler tpe`` (one worker, or
``--jobs 2`` every other time) on one study, ``kill -9`` its process group after a random
0-``--max-wait`` s (during start-up, trial creation, sampling, evaluation or a write), and note
the COMPLETE trials it holds; finally resume once to a budget of 20 more trials. Then:

* **lost**: a trial seen COMPLETE before a kill that is gone or changed, plus a killed trial
  (``status = "worker died"``) that was neither retried nor out of retries;
* **left RUNNING**: trials RUNNING or WAITING after the final resume (zombies);
* **duplicated**: a failed trial queued again more than once, or a trial number used twice.

All three should be 0.

    python bench/kill_stress.py --kills 70 [--postgres postgresql://USER@HOST:PORT/DB] [--storages sqlite,journal]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from accel_dse.search import open_storage, parse_storage
from accel_dse.search.study.owner import MAX_RETRY
from accel_spec.errors import AccelDseError


def _load(url: str) -> optuna.Study | None:
    storage = open_storage(parse_storage(url), heartbeat_interval=None)
    if "k" not in optuna.get_all_study_names(storage):
        return None
    return optuna.load_study(study_name="k", storage=storage)


def _sweep(exe: str, url: str, out: Path, trials: int, jobs: int, seed: int) -> list[str]:
    return [exe, "sweep", "--sampler", "tpe", "--trials", str(trials), "--study", "k", "--storage", url,
            "--out-dir", str(out), "--jobs", str(jobs), "--seed", str(seed), "--heartbeat", "2", "--quiet"]


def stress(exe: str, url: str, out: Path, kills: int, max_wait: float, rng: random.Random) -> dict[str, int]:
    """Kill ``kills`` sweeps of study ``k`` in ``url``; returns the counts."""
    seen: dict[int, tuple] = {}
    for i in range(kills):
        jobs = 2 if i % 2 else 1
        proc = subprocess.Popen(_sweep(exe, url, out, 100_000, jobs, i), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        wait = rng.uniform(0.0, max_wait)
        time.sleep(wait)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        try:
            study = _load(url)
        except AccelDseError as exc:
            raise SystemExit(f"after kill {i + 1} (jobs {jobs}, at {wait:.2f} s): {exc}") from None
        if study is not None:
            for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
                seen.setdefault(t.number, (t.params, t.values))
    study = _load(url)
    held = len(study.get_trials(deepcopy=False)) if study is not None else 0
    done = subprocess.run(_sweep(exe, url, out, held + 20, 1, kills), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"final resume failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    study = _load(url)
    if study is None:
        raise SystemExit("the study was never created")
    trials = study.get_trials(deepcopy=False)
    by_number = {t.number: t for t in trials}
    lost = sum(1 for n, rec in seen.items() if n not in by_number or (by_number[n].params, by_number[n].values) != rec)
    retries = collections.Counter(tuple(t.system_attrs["retry_history"]) for t in trials
                                  if "retry_history" in t.system_attrs)
    killed = [t for t in trials if t.state == TrialState.FAIL and t.user_attrs.get("status") == "worker died"]
    given_up = 0
    for t in killed:
        chain = (*t.system_attrs.get("retry_history", []), t.number)
        if chain in retries:
            continue
        if len(chain) > MAX_RETRY:
            given_up += 1
        else:
            lost += 1
    duplicated = sum(n - 1 for n in retries.values() if n > 1) + len(trials) - len(by_number)
    return {
        "kills": kills, "trials": len(trials), "complete": sum(t.state == TrialState.COMPLETE for t in trials),
        "killed trials": len(killed), "out of retries": given_up, "lost": lost,
        "left RUNNING": sum(t.state in (TrialState.RUNNING, TrialState.WAITING) for t in trials),
        "duplicated": duplicated,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=70, help="kills per storage (default 70)")
    parser.add_argument("--max-wait", type=float, default=4.0, help="longest wait before a kill, s (default 4)")
    parser.add_argument("--storages", default="sqlite,journal", help="comma-separated: sqlite, journal")
    parser.add_argument("--postgres", default=None, help="also an (empty) PostgreSQL database URL")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=None, help="keep the study files here (default: a temporary directory)")
    parser.add_argument("--accel-dse", default=shutil.which("accel-dse") or str(Path(sys.executable).with_name(
        "accel-dse")))
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rng = random.Random(args.seed)
    total: collections.Counter[str] = collections.Counter()
    if args.work_dir:
        Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext(args.work_dir) if args.work_dir else tempfile.TemporaryDirectory(
            prefix="kill-stress-") as tmp:
        urls = {"sqlite": f"sqlite:///{tmp}/study.db", "journal": f"journal:{tmp}/study.journal"}
        chosen = [(kind, urls[kind]) for kind in args.storages.split(",") if kind]
        if args.postgres:
            chosen.append(("postgresql", args.postgres))
        for kind, url in chosen:
            start = time.monotonic()
            counts = stress(args.accel_dse, url, Path(tmp), args.kills, args.max_wait, rng)
            total.update(counts)
            print(f"{kind:10s} " + ", ".join(f"{k} {v}" for k, v in counts.items())
                  + f" ({time.monotonic() - start:.0f} s)", flush=True)
    print("all        " + ", ".join(f"{k} {total[k]}" for k in ("kills", "lost", "left RUNNING", "duplicated")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
