"""The claim protocol of ``verify --share`` at the points where two verifiers interleave."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from accel_dse.verify import Claims


def _storage(tmp_path):
    url = f"sqlite:///{tmp_path / 'claims.db'}"
    optuna.create_study(storage=url, study_name="s")
    return url


def test_a_claim_caught_between_its_move_to_running_and_its_owner_record_is_live(tmp_path):
    url = _storage(tmp_path)
    first, second = Claims(url, "s", ttl_s=60.0), Claims(url, "s", ttl_s=60.0)
    seen = []
    real = first._storage.set_trial_state_values

    def interleaved(trial_id, state, values=None):
        moved = real(trial_id, state=state, values=values)
        if state == TrialState.RUNNING and moved:
            seen.append(second.take(7))  # the other verifier looks right after the move
        return moved

    first._storage.set_trial_state_values = interleaved
    taken = first.take(7)
    assert taken is not None
    assert seen == [None]  # the second verifier saw a live claim, not an expired one
    claims = [t for t in first.study.get_trials() if t.user_attrs.get("target") == 7]
    assert [t.state for t in claims] == [TrialState.RUNNING]  # and did not fail it or queue another


def test_an_expired_claim_is_failed_once_and_the_design_taken_over(tmp_path):
    url = _storage(tmp_path)
    now = [1000.0]
    dead = Claims(url, "s", ttl_s=10.0, clock=lambda: now[0])
    alive = Claims(url, "s", ttl_s=10.0, clock=lambda: now[0])
    assert dead.take(3) is not None
    assert alive.take(3) is None  # live
    now[0] += 11.0
    taken = alive.take(3)
    assert taken is not None
    states = sorted(t.state.name for t in alive.study.get_trials() if t.user_attrs.get("target") == 3)
    assert states == ["FAIL", "RUNNING"]
    alive.done(taken)
    assert alive.finished(3) and dead.take(3) is None


def test_two_bids_at_once_leave_one_owner(tmp_path):
    # Both verifiers bid before either reads the claims back: the lower trial number wins, the
    # other bid fails (a state compare-and-set let both win on SQLite: a design verified twice).
    url = _storage(tmp_path)
    first, second = Claims(url, "s", ttl_s=60.0), Claims(url, "s", ttl_s=60.0)
    tokens = first._bid(5), second._bid(5)
    won = [first._resolve(5, tokens[0]), second._resolve(5, tokens[1])]
    assert won[0] is not None and won[1] is None
    claims = sorted((t for t in first.study.get_trials() if t.user_attrs.get("target") == 5), key=lambda t: t.number)
    assert [t.state for t in claims] == [TrialState.RUNNING, TrialState.FAIL]
    assert claims[1].user_attrs["reason"] == "lost the bid"
    assert second.take(5) is None  # and the winner's claim is live for everyone
