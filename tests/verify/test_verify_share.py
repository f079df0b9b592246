"""Several ``verify --share`` processes split a study's top K; a killed verifier's claim expires and is taken over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from report_testlib import make_study
from share_worker import passed

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORKER = str(HERE / "share_worker.py")
TTL_S = 6.0  # renewed every 2 s: room for a loaded 2-core machine
K = 10


def _start(url: str, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, WORKER, url, "s", str(K), str(TTL_S), *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_verifiers_split_the_top_10_once_each_and_take_over_a_dead_ones_claim(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=60)
    dead = _start(url, "--die")
    _, err = dead.communicate(timeout=300)
    assert dead.returncode == -9, err
    victim = int(err.split("checking ")[1].split()[0])  # the design it held when it died
    meet = tmp_path / "meet"  # both verifiers hold a claim before either finishes one
    meet.mkdir()
    first, second = _start(url, "--meet", str(meet), "2"), _start(url, "--meet", str(meet), "2")
    outs = [p.communicate(timeout=300) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outs
    mine = [set(json.loads(out.strip().splitlines()[-1])) for out, _ in outs]
    assert mine[0] and mine[1]  # both did some of the work
    assert not mine[0] & mine[1]  # no design verified twice
    study = optuna.load_study(study_name="s", storage=url)
    recorded = {int(k.rsplit(".", 1)[1]) for k in study.user_attrs if k.startswith("accel_dse.verify.")}
    assert len(recorded) == K and mine[0] | mine[1] == recorded  # the whole top 10, each once
    assert victim in recorded  # the dead verifier's design was taken over
    claims = optuna.load_study(study_name="s.verify-claims", storage=url).get_trials()
    failed = [t for t in claims if t.state == TrialState.FAIL]
    expired = [t for t in failed if t.user_attrs["reason"] == "claim expired"]
    assert [t.user_attrs["target"] for t in expired] == [victim]
    assert all(t.user_attrs["reason"] == "lost the bid" for t in failed if t not in expired)  # nothing else failed
    done = [t.user_attrs["target"] for t in claims if t.state == TrialState.COMPLETE]
    assert sorted(done) == sorted(recorded)  # one finished claim per design


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_verifier_holds_a_claim_only_for_a_design_it_is_checking(tmp_path, monkeypatch, jobs):
    """Claims are taken as checks start, not for the whole top K up front: a queued claim is not
    renewed, so it would expire under a long first check and another verifier would check its design too."""
    from accel_dse.verify import _run

    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(url, trials=60)
    held: list[int] = []

    def stand_in(config, number, rank, pareto, **how):
        claims = optuna.load_study(study_name="s.verify-claims", storage=url).get_trials()
        held.append(sum(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in claims))
        time.sleep(0.05)
        return passed(config, number, rank, pareto, how, "stand-in")

    monkeypatch.setattr(_run, "_verify_one", stand_in)
    results = _run.verify_top(url, "s", K, simulator="icarus", synth=False, share=True, claim_ttl_s=60.0, jobs=jobs)
    assert sorted(r.trial for r in results) == sorted({r.trial for r in results}) and len(results) == K
    assert len(held) == K and max(held) <= jobs  # at most one claim per slot, each check's own
    assert max(held) >= 1
