"""Kill -9 a sweep, resume it, count the trials left RUNNING (issue 17's repro).

Each try: ``accel-dse sweep --sampler tpe --trials 5000`` on a fresh SQLite study (the real
model, the default space), ``kill -9`` of its process group after ``--kill-after`` s, then the
same command again with ``--trials`` = the trials it holds + ``--more``; afterwards the RUNNING
(and WAITING) trials of the study are counted. A trial left RUNNING is a zombie: it counts
against ``--trials`` forever.

    python bench/kill_resume.py --tries 20 [--accel-dse PATH/TO/accel-dse] [--storage sqlite|journal]

``--accel-dse`` picks the installation to test (another checkout's ``.venv/bin/accel-dse`` for
a before / after comparison). Prints one line per try and a total.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState


def _counts(url: str) -> tuple[int, int, int]:
    """(all trials, RUNNING, WAITING) of study ``k`` in ``url``."""
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        storage: object = JournalStorage(JournalFileBackend(url[len("journal:"):]))
    else:
        storage = url
    study = optuna.load_study(study_name="k", storage=storage)  # type: ignore[arg-type]
    trials = study.get_trials(deepcopy=False)
    return (len(trials), sum(t.state == TrialState.RUNNING for t in trials),
            sum(t.state == TrialState.WAITING for t in trials))


def _sweep(exe: str, url: str, trials: int, out: Path) -> list[str]:
    return [exe, "sweep", "--sampler", "tpe", "--trials", str(trials), "--study", "k", "--storage", url,
            "--out-dir", str(out), "--quiet", "--json"]


def one_try(exe: str, kind: str, kill_after: float, more: int, work: Path) -> tuple[int, int, int]:
    """One kill-and-resume; returns (trials at the kill, RUNNING after resume, WAITING after resume)."""
    url = f"sqlite:///{work}/study.db" if kind == "sqlite" else f"journal:{work}/study.journal"
    proc = subprocess.Popen(_sweep(exe, url, 5000, work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    time.sleep(kill_after)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    held, _, _ = _counts(url)
    done = subprocess.run(_sweep(exe, url, held + more, work), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"resume failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    _, running, waiting = _counts(url)
    return held, running, waiting


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--kill-after", type=float, default=12.0, help="seconds before kill -9 (default 12)")
    parser.add_argument("--more", type=int, default=10, help="trials the resume adds (default 10)")
    parser.add_argument("--storage", choices=["sqlite", "journal"], default="sqlite")
    parser.add_argument("--accel-dse", default=shutil.which("accel-dse") or str(Path(sys.executable).with_name(
        "accel-dse")), help="accel-dse executable to test")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    stuck = 0
    for i in range(args.tries):
        with tempfile.TemporaryDirectory(prefix="kill-resume-") as tmp:
            held, running, waiting = one_try(args.accel_dse, args.storage, args.kill_after, args.more, Path(tmp))
        stuck += running > 0
        print(f"try {i + 1:2d}: {held:4d} trials at the kill, after resume {running} RUNNING, {waiting} WAITING",
              flush=True)
    print(f"{args.accel_dse} ({args.storage}): {stuck} of {args.tries} tries left a RUNNING trial")
    return 0


if __name__ == "__main__":
    sys.exit(main())
