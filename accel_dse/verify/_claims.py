"""Sharing a study's top-K verification between several ``accel-dse verify`` processes (machines).

Each design is claimed once, through the study's own storage: a companion study
``<study>.verify-claims`` holds *claim trials* (user attributes ``target``: the sweep trial's
number; ``owner``: a token of the verifier that made it; ``expires``: Unix seconds; ``host``,
``pid``). A verifier takes a design by *bidding*: it creates a claim trial carrying its token
and a fresh expiry in one step, then reads the design's claims back; the lowest-numbered claim
that has not failed wins, and a losing bid is failed at once. Trial numbers are handed out in
creation order inside the storage's own transaction, so every verifier agrees on the winner.
(A compare-and-set of the trial state, WAITING to RUNNING, is not enough: on SQLite two
processes can both read WAITING and both write RUNNING, and a design was verified twice.)

The winner moves its claim to RUNNING and pushes its expiry forward every third of ``ttl_s``
while it works. A claim whose expiry has passed (a dead or cut-off machine) is failed by the
next verifier that looks, which then bids. A finished design's claim is COMPLETE.

If two verifiers bid for the same design at once, the lower trial number wins; the other
fails its bid. Clocks of the machines are assumed to agree to well within ``ttl_s``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
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

    def _bid(self, target: int) -> str:
        """Create a claim trial for ``target`` with this verifier's token and a fresh expiry; the token."""
        token = uuid.uuid4().hex
        attrs = {"target": target, "owner": token, "expires": self._clock() + self.ttl_s, **self._owner}
        self.study.enqueue_trial({}, user_attrs=attrs, skip_if_exists=False)
        return token

    def _live(self, claim: FrozenTrial) -> bool:
        return float(claim.user_attrs.get("expires", 0.0)) > self._clock()

    def _fail(self, claim: FrozenTrial, reason: str) -> None:
        with contextlib.suppress(UpdateFinishedTrialError):
            self._storage.set_trial_user_attr(claim._trial_id, "reason", reason)
            self._storage.set_trial_state_values(claim._trial_id, state=TrialState.FAIL)

    def finished(self, target: int) -> bool:
        """Whether sweep trial ``target``'s design has been verified (by any verifier)."""
        return any(t.state == TrialState.COMPLETE for t in self._claims(target))

    def take(self, target: int) -> int | None:
        """Claim sweep trial ``target`` for this process; the claim trial's id, or ``None`` if it is taken or done."""
        claims = [t for t in self._claims(target) if t.state != TrialState.FAIL]
        if any(t.state == TrialState.COMPLETE for t in claims):
            return None
        if claims and self._live(claims[0]):
            return None  # a live verifier has it
        for stale in claims:  # expired (or never owned): fail them, then bid
            if not self._live(stale):
                self._fail(stale, "claim expired")
        return self._resolve(target, self._bid(target))

    def _resolve(self, target: int, token: str) -> int | None:
        """After bidding with ``token``: the claim's id if it is the lowest live one, else fail it and ``None``."""
        claims = [t for t in self._claims(target) if t.state != TrialState.FAIL]
        mine = next(t for t in claims if t.user_attrs.get("owner") == token)
        winner = claims[0]
        if winner.number == mine.number and not any(t.state == TrialState.COMPLETE for t in claims):
            self._storage.set_trial_state_values(mine._trial_id, state=TrialState.RUNNING)
            return mine._trial_id
        self._fail(mine, "lost the bid")
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
        with contextlib.suppress(UpdateFinishedTrialError):
            self._storage.set_trial_user_attr(claim_id, "reason", "released")
            self._storage.set_trial_state_values(claim_id, state=TrialState.FAIL)

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
            except Exception:  # noqa: BLE001 - a transient storage error (a busy SQLite file) must not end
                continue  # the renewals: try again next tick; if it persists, the claim expires (module notes)

    def __enter__(self) -> _Renewer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
