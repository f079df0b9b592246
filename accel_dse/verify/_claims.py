"""Sharing a study's top-K verification between several ``accel-dse verify`` processes (machines).

Each design is claimed once, through the study's own storage: a companion study
``<study>.verify-claims`` holds one *claim trial* per design (user attribute ``target``: the
sweep trial's number). A claim trial starts WAITING; a verifier takes it by moving it to
RUNNING, which the storage does for one caller only (the compare-and-set Optuna's own trial
queue relies on). The taker writes an expiry time (``expires``, Unix seconds) before
that move, so no other verifier ever sees the claim RUNNING without a fresh expiry, then
records itself (``host``, ``pid``); the expiry is pushed forward every third of ``ttl_s`` while
it works; a claim whose expiry has passed (a dead or cut-off machine) is failed, which again
succeeds for one caller only, and a fresh claim is queued for the design. A finished design's
claim is COMPLETE.

If two verifiers queue a claim for the same design at once, only the claim with the lowest
trial number that has not failed counts (trial numbers only grow, so every verifier agrees).
Clocks of the machines are assumed to agree to well within ``ttl_s``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

__all__ = ["Claims", "CLAIM_TTL_S"]

#: Seconds a claim lives without being renewed (its verifier renews it every third of that).
CLAIM_TTL_S = 120.0
_SUFFIX = ".verify-claims"


class Claims:
    """The claim trials of one study's verification (see the module notes).

    Args:
        storage: The study's (writable) Optuna storage.
        study_name: The sweep study.
        ttl_s: Seconds a claim lives without renewal.
        clock: Wall clock, Unix seconds (tests pass their own).
    """

    def __init__(self, storage: Any, study_name: str, *, ttl_s: float = CLAIM_TTL_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._owner = {"host": socket.gethostname(), "pid": os.getpid()}
        self.study = optuna.create_study(storage=storage, study_name=study_name + _SUFFIX, load_if_exists=True)
        self._storage = self.study._storage

    def _claims(self, target: int) -> list[FrozenTrial]:
        trials = self.study.get_trials(deepcopy=False)
        return sorted((t for t in trials if t.user_attrs.get("target") == target), key=lambda t: t.number)

    def _queue(self, target: int) -> None:
        self.study.enqueue_trial({}, user_attrs={"target": target}, skip_if_exists=False)

    def finished(self, target: int) -> bool:
        """Whether sweep trial ``target``'s design has been verified (by any verifier)."""
        return any(t.state == TrialState.COMPLETE for t in self._claims(target))

    def take(self, target: int) -> int | None:
        """Claim sweep trial ``target`` for this process; the claim trial's id, or ``None`` if it is taken or done."""
        for _ in range(3):
            claims = [t for t in self._claims(target) if t.state != TrialState.FAIL]
            if any(t.state == TrialState.COMPLETE for t in claims):
                return None
            if not claims:
                self._queue(target)
                continue
            first = claims[0]
            if first.state == TrialState.RUNNING:
                if float(first.user_attrs.get("expires", 0.0)) > self._clock():
                    return None  # a live verifier has it
                try:  # expired: fail it (one caller succeeds) and queue a fresh claim
                    self._storage.set_trial_user_attr(first._trial_id, "reason", "claim expired")
                    if self._storage.set_trial_state_values(first._trial_id, state=TrialState.FAIL):
                        self._queue(target)
                except UpdateFinishedTrialError:
                    pass
                continue
            try:
                self.renew(first._trial_id)  # before RUNNING: a RUNNING claim always has a fresh expiry
                if self._storage.set_trial_state_values(first._trial_id, state=TrialState.RUNNING):
                    for key, value in self._owner.items():
                        self._storage.set_trial_user_attr(first._trial_id, key, value)
                    return first._trial_id
            except UpdateFinishedTrialError:
                pass
        return None

    def renew(self, claim_id: int) -> None:
        """Push the expiry of claim ``claim_id`` to ``ttl_s`` from now."""
        self._storage.set_trial_user_attr(claim_id, "expires", self._clock() + self.ttl_s)

    def done(self, claim_id: int) -> None:
        """The claimed design is verified and recorded.

        A verifier that could not renew its claim for a whole ``ttl_s`` may find it taken over
        (failed by another verifier, which then checks the design again): nothing to mark then.
        """
        with contextlib.suppress(UpdateFinishedTrialError):
            self._storage.set_trial_state_values(claim_id, state=TrialState.COMPLETE, values=[0.0])

    def release(self, claim_id: int) -> None:
        """Give the claim back unfinished (an error or Ctrl-C): another verifier may take the design."""
        target = self._storage.get_trial(claim_id).user_attrs.get("target")
        try:
            if self._storage.set_trial_state_values(claim_id, state=TrialState.FAIL) and target is not None:
                self._queue(int(target))
        except UpdateFinishedTrialError:
            pass

    def keep_alive(self, claim_id: int) -> _Renewer:
        """A context manager that renews claim ``claim_id`` every third of ``ttl_s`` while the design is checked."""
        return _Renewer(self, claim_id)


class _Renewer:
    def __init__(self, claims: Claims, claim_id: int) -> None:
        self._claims = claims
        self._claim_id = claim_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="accel-dse-verify-claim", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._claims.ttl_s / 3):
            try:
                self._claims.renew(self._claim_id)
            except UpdateFinishedTrialError:  # taken over after a stall: nothing left to renew
                return

    def __enter__(self) -> _Renewer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
