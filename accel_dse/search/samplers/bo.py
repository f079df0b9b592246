"""``bo``: Bayesian optimisation with Gaussian processes and constraint models, as an Optuna sampler.

* **Encoding** (:mod:`accel_dse.search.samplers.bo_encoding`): every free parameter to coordinates in
  [0, 1]: ordered values (a pow2 exponent, a numeric choice's position, an integer or real
  range, log ranges in log space) as one normalised coordinate, unordered categories
  (dataflow, booleans) one-hot.
* **Surrogates** (:mod:`accel_dse.search.samplers.gp`): a GP (Matern-5/2, ARD) on the log objective
  (sign-flipped for a maximised one), one GP per constraint on ``log(metric / bound)`` (so
  ``<= 0`` is met), and, once a design has failed (infeasible, invalid, non-finite), a GP on
  the failure indicator (1 failed, 0 ran) read as the probability that a design runs; a
  failed design also enters the objective's GP at the worst value seen (measured: on a space
  with 31 % infeasible designs, 9-14 % of the proposals after the start-up failed with it,
  54-71 % without). The GPs condition on at most :data:`MAX_TRAIN` trials (the best half,
  the rest at random); hyperparameters by maximum likelihood on at most 150 of them, afresh
  every ``refit_every`` proposals and warm-started from the last fit in between (a cache in
  the process, not state: a new process starts with a full fit).
* **Acquisition**: constrained expected improvement, in logs: ``log EI`` over the best
  feasible value plus ``log P(constraint <= 0)`` of every constraint plus ``log P(runs)``;
  before any feasible design, the probability of feasibility alone.
* **Candidates**: a finite space of up to :data:`MAX_GRID` points is enumerated; the points not
  yet evaluated are scored (a random :data:`MAX_CANDIDATES` of them when more, plus every one-
  and two-step neighbour of the five best designs); otherwise random designs plus those
  neighbours (continuous reals: sampled values and small moves around the best). A candidate
  whose probability of feasibility is below 1e-6 of the best candidate's is not scored further.
* **Several objectives**: ParEGO: each trial draws a random weight vector and scalarises the
  normalised log objectives (augmented Chebyshev), then the single-objective machinery runs.
* **Parallel workers**: the RUNNING trials of other workers enter every GP at their predicted
  mean (kriging believer), so their variance there collapses and workers spread out. A worker
  takes the best of its ranked candidates that no other trial holds or claims, and claims it
  (system attribute :data:`PROPOSAL_KEY`, read by other workers until the parameters are
  written). Two workers that choose in the same instant can both claim one design, so after
  writing its claim a worker reads the claims again: it gives the design up (and takes its next
  candidate) if another trial holds it for good (:data:`HELD_KEY` equal to that trial's claim,
  parameters written, or evaluated) or a lower-numbered trial claims it too; while only
  higher-numbered trials claim it, undecided, it reads again (their workers give it up or hold
  it within one read and one write); with no rival left it sets :data:`HELD_KEY`. Of two claims
  on one design, the later of the two reads sees the other claim (on every storage the sweep
  supports, in memory, SQLite, PostgreSQL or a journal file, a read sees each write finished
  before it): the lower-numbered trial then waits for the other or the higher-numbered one gives
  way, so at most one holds the design and none is evaluated twice. Waits go only towards higher
  numbers, so no two workers wait on each other; a claim a dead worker left undecided is given
  up after :data:`SETTLE_TIMEOUT_S`.
* **Start-up**: ``n_startup`` random designs before the first GP.

Nothing is learned outside the study: a resumed run or another worker refits its GPs from the
stored trials.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState
from threadpoolctl import ThreadpoolController

from accel_dse.search.samplers.bo_encoding import Encoder
from accel_dse.search.samplers.design_sampler import DesignSampler
from accel_dse.search.samplers.distinct import holds_design
from accel_dse.search.samplers.gp import GaussianProcess, fit_gp, log_expected_improvement, log_prob_below
from accel_dse.search.space.design_space import DesignSpace
from accel_dse.search.space.trial_values import relative_excess

__all__ = ["BayesOptSampler", "HELD_KEY", "MAX_GRID", "MAX_CANDIDATES", "PROPOSAL_KEY", "SETTLE_TIMEOUT_S",
           "parego_scalarise"]

#: A finite space up to this many points is enumerated once.
MAX_GRID = 200_000
#: Candidates scored per trial (random unseen designs; the neighbours of the best come on top).
MAX_CANDIDATES = 20_000
#: Most trials the GPs condition on: the best half by objective, the rest drawn at random.
MAX_TRAIN = 300
#: Candidates whose log probability of feasibility is this far below the best candidate's are dropped.
PRUNE_LOG_P = math.log(1e-6)
#: Candidates ranked per proposal (the best one no other worker holds is taken).
_RANKED = 32
#: System attribute holding the design ``bo`` chose for a trial (seen by other workers at once).
PROPOSAL_KEY = "bo:params"
#: System attribute set to the trial's :data:`PROPOSAL_KEY` once no other trial contests it.
HELD_KEY = "bo:held"
#: Longest wait (s) for higher-numbered trials' workers to settle a tie over one design.
SETTLE_TIMEOUT_S = 5.0
#: First and longest pause (s) between two reads of the claims while a tie is settled.
_PAUSE_S = (0.001, 0.05)
#: FAIL statuses that teach the failure model (the design itself cannot run or is invalid).
_FAILED_STATUS = ("infeasible", "overflow", "invalid", "non-finite", "constraint")
#: Range of a constraint's log(metric / bound) the GPs see (e^4 = 55x the bound).
_G_CLIP = 4.0
_CONTROLLER: ThreadpoolController | None = None
#: A design's position rounded (a dictionary key).
Key = tuple[float, ...]
#: Designs other trials hold or claim: key -> (trial number, held for good) of each such trial.
Claims = dict[Key, list[tuple[int, bool]]]


def _single_thread() -> Any:
    """Limit BLAS to one thread: with small matrices, OpenBLAS's threads cost 10-25x (measured)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


def parego_scalarise(values: np.ndarray, weights: np.ndarray, rho: float = 0.05) -> np.ndarray:
    """Augmented Chebyshev scalarisation of minimised ``values`` (n, k) normalised to [0, 1] per column.

    ``s = max_j w_j f_j + rho * sum_j w_j f_j`` (Knowles, ParEGO, IEEE TEC 2006).
    """
    lo, hi = values.min(0), values.max(0)
    f = (values - lo) / np.where(hi > lo, hi - lo, 1.0)
    return (f * weights).max(1) + rho * (f * weights).sum(1)


def _log_values(values: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Signed objectives to minimise: ``sign * log(v)`` per column whose values are all positive."""
    out = values * signs
    for j in range(values.shape[1]):
        if np.all(values[:, j] > 0):
            out[:, j] = signs[j] * np.log(values[:, j])
    return out


class BayesOptSampler(DesignSampler):
    """Constrained Bayesian optimisation with GPs (see the module docstring).

    Args:
        space: The design space (free parameters, objectives, constraints).
        seed: Seed of the start-up designs, candidate sets, ParEGO weights and fit restarts.
        n_startup: Random designs before the GPs take over.
        max_candidates: Candidates scored per trial (see :data:`MAX_CANDIDATES`).
        max_train: Most trials the GPs condition on (see :data:`MAX_TRAIN`).
        fit_points: Most trials the GP hyperparameters are fitted on.
        refit_every: Every this many proposals the hyperparameters are fitted afresh (a
            default and a random start); in between, a short fit from the last ones.
        impute_failed: Also enter failed designs into the objective's GP at the worst value seen.
    """

    def __init__(
        self,
        space: DesignSpace,
        *,
        seed: int | None = None,
        n_startup: int = 10,
        max_candidates: int = MAX_CANDIDATES,
        max_train: int = MAX_TRAIN,
        fit_points: int = 150,
        refit_every: int = 10,
        impute_failed: bool = True,
    ) -> None:
        super().__init__(space, seed=seed)
        self._enc = Encoder(space)
        self._rng = np.random.default_rng(seed)
        self._n_startup = n_startup
        self._max_candidates = max_candidates
        self._max_train = max_train
        self._fit_points = fit_points
        self._grid: np.ndarray | None = None
        self._grid_x: np.ndarray | None = None
        if self._enc.finite and math.prod(self._enc.sizes) <= MAX_GRID:
            self._grid = self._enc.grid()
            self._grid_x = self._enc.encode(self._grid)
        self._refit_every = refit_every
        self._impute_failed = impute_failed
        #: Last fitted log hyperparameters per GP, a warm start between full fits (a cache only).
        self._theta: dict[str, np.ndarray] = {}
        self._fits = 0

    # -- the study's trials ----------------------------------------------------------------------
    def _relative(self, trial: FrozenTrial) -> list[float] | None:
        stored = trial.system_attrs.get("constraints")
        if stored is not None and len(stored) == len(self._space.constraints):
            return [float(v) for v in stored]
        values = trial.user_attrs.get("constraint_values")
        if values is None or len(values) != len(self._space.constraints):
            return None
        return relative_excess(values, self._space)

    def _g(self, relative: Sequence[float]) -> list[float]:
        """``log(metric / bound)`` of each constraint (``<= 0`` met) from its relative excess, clipped."""
        out = []
        for rel, c in zip(relative, self._space.constraints, strict=True):
            if c.bound > 0 and c.op == "<=":
                g = math.log(max(1.0 + rel, 1e-12))  # metric / bound = 1 + rel
            elif c.bound > 0:
                g = -math.log(max(1.0 - rel, 1e-12))  # metric / bound = 1 - rel
            else:
                g = rel
            out.append(min(max(g, -_G_CLIP), _G_CLIP))
        return out

    def _gather(self, study: Study, current: FrozenTrial) -> dict[str, Any]:
        enc = self._enc
        done_pos, done_vals, done_g = [], [], []
        failed, pending, seen = [], [], []
        for t in study.get_trials(deepcopy=False):
            if t.number == current.number:
                continue
            pos = enc.position(self._params_of(t))
            if pos is None:
                continue
            if t.state == TrialState.RUNNING:
                pending.append(pos)
                seen.append(pos)
            elif t.state == TrialState.COMPLETE and t.values is not None:
                rel = self._relative(t) if self._space.constraints else []
                if rel is None:
                    continue
                done_pos.append(pos)
                done_vals.append(t.values)
                done_g.append(self._g(rel))
                seen.append(pos)
            elif t.state == TrialState.FAIL:
                status = t.user_attrs.get("status")
                if status in _FAILED_STATUS:
                    failed.append(pos)
                if holds_design(t):
                    seen.append(pos)
        width = len(enc.axes)
        k, c = len(self._space.objectives), len(self._space.constraints)
        as_array = lambda rows, w: np.asarray(rows, dtype=float).reshape(len(rows), w)  # noqa: E731
        return {
            "pos": as_array(done_pos, width), "values": as_array(done_vals, k), "g": as_array(done_g, c),
            "failed": as_array(failed, width), "pending": as_array(pending, width), "seen": as_array(seen, width),
        }

    # -- candidates --------------------------------------------------------------------------------
    def _candidates(self, seen: np.ndarray, best: np.ndarray) -> np.ndarray:
        enc, rng = self._enc, self._rng
        near = [enc.neighbours(p, rng) for p in best]
        if self._grid is not None:
            free = np.ones(len(self._grid), dtype=bool)
            if len(seen):
                free[enc.grid_index(seen)] = False
            index = np.flatnonzero(free)
            if len(index) > self._max_candidates:
                index = rng.choice(index, self._max_candidates, replace=False)
                if near:
                    extra = enc.grid_index(np.vstack(near))
                    index = np.union1d(index, extra[free[extra]])
            return index  # grid rows
        pool = np.vstack([enc.random(rng, self._max_candidates), *near])
        keys = {tuple(np.round(p, 9)) for p in seen}
        keep = [i for i, p in enumerate(pool) if tuple(np.round(p, 9)) not in keys]
        return pool[keep]

    def _encode_candidates(self, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._grid is not None:
            return self._grid[cand], self._grid_x[cand]  # type: ignore[index]
        return cand, self._enc.encode(cand)

    # -- the BaseSampler interface ---------------------------------------------------------------
    def _design(self, study: Study, trial: FrozenTrial) -> dict[str, Any]:
        """The unseen candidate design of highest constrained expected improvement."""
        # A design taken while this worker proposes is taken by a trial unfinished now or newer:
        # claims are read from the oldest such trial on (older finished ones are in the proposal's view).
        since = min((t.number for t in study.get_trials(deepcopy=False) if not t.state.is_finished()),
                    default=trial.number)
        with _single_thread():
            ranked = self._propose(study, trial)
        return self._claim(study, trial, ranked, since)

    # -- claims of parallel workers (the module docstring's "Parallel workers") ----------------------
    def _claim(self, study: Study, trial: FrozenTrial, ranked: np.ndarray, since: int) -> dict[str, Any]:
        """Claim and hold the best of ``ranked`` no other trial claims (running, or finished from ``since`` on)."""
        storage = study._storage
        claims = self._claims(study.get_trials(deepcopy=False), trial, since)
        given_up: set[Key] = set()
        while True:
            free = [pos for pos in ranked if self._key(pos) not in claims and self._key(pos) not in given_up]
            params = self._enc.params(free[0] if free else ranked[0])
            storage.set_trial_system_attr(trial._trial_id, PROPOSAL_KEY, params)
            if not free:  # every ranked design is taken (the space is nearly exhausted): the best one
                break
            contested = self._settle(study, trial, self._key(free[0]), since)
            if contested is None:
                break
            given_up.add(self._key(free[0]))
            claims = contested
        storage.set_trial_system_attr(trial._trial_id, HELD_KEY, params)
        return params

    def _settle(self, study: Study, trial: FrozenTrial, key: Key, since: int) -> Claims | None:
        """Read the claims until ``trial``'s claim on ``key`` is settled.

        Returns:
            ``None`` if the trial keeps the design, else the claims read last (it gives it up).
        """
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        pause, longest = _PAUSE_S
        while True:
            claims = self._claims(study.get_trials(deepcopy=False), trial, since)
            rivals = claims.get(key, [])
            if not rivals:
                return None
            if any(held or number < trial.number for number, held in rivals) or time.monotonic() >= deadline:
                return claims
            time.sleep(pause)  # only higher-numbered trials claim it, undecided: they settle first
            pause = min(2 * pause, longest)

    def _claims(self, trials: Sequence[FrozenTrial], current: FrozenTrial, since: int) -> Claims:
        """Designs the unfinished trials claim and the finished ones numbered ``since`` or more hold."""
        claims: Claims = {}
        for t in trials:
            running = t.state == TrialState.RUNNING
            if t.number == current.number or not holds_design(t) or (not running and t.number < since):
                continue
            pos = self._enc.position(self._params_of(t))
            if pos is None:
                continue
            held = not running or bool(t.params) or t.system_attrs.get(HELD_KEY) == t.system_attrs.get(PROPOSAL_KEY)
            claims.setdefault(self._key(pos), []).append((t.number, held))
        return claims

    @staticmethod
    def _params_of(trial: FrozenTrial) -> dict[str, Any]:
        """A trial's parameters, or while it runs the design ``bo`` chose for it until all are written."""
        if trial.state != TrialState.RUNNING:
            return trial.params
        proposal = trial.system_attrs.get(PROPOSAL_KEY)
        if isinstance(proposal, dict) and len(trial.params) < len(proposal):
            return proposal  # the objective writes the parameters one by one
        return trial.params

    @staticmethod
    def _key(pos: np.ndarray) -> Key:
        return tuple(np.round(pos, 9))

    def _propose(self, study: Study, trial: FrozenTrial) -> np.ndarray:
        """Candidate positions, best first (a few)."""
        data = self._gather(study, trial)
        enc, rng = self._enc, self._rng
        n_done = len(data["pos"])
        if n_done + len(data["failed"]) < self._n_startup or n_done < 2:
            return self._random_unseen(data["seen"])
        x = enc.encode(data["pos"])
        feasible = np.all(data["g"] <= 0, axis=1) if data["g"].shape[1] else np.ones(n_done, dtype=bool)
        signs = np.array([o.sign for o in self._space.objectives])
        y = _log_values(data["values"], signs)
        if y.shape[1] > 1:
            y = parego_scalarise(y, rng.dirichlet(np.ones(y.shape[1])))
        else:
            y = y[:, 0]
        excess = np.maximum(data["g"], 0).sum(1) if data["g"].shape[1] else np.zeros(n_done)
        key = (y - y.mean()) / (y.std() or 1.0) + 10.0 * excess
        train = self._train_subset(key)
        xt = x[train]
        pend = enc.encode(data["pending"]) if len(data["pending"]) else np.empty((0, enc.dim))

        full = self._fits % self._refit_every == 0
        self._fits += 1

        def fit(role: str, target: np.ndarray, inputs: np.ndarray = xt) -> GaussianProcess:
            warm = None if full else self._theta.get(role)
            if warm is None:
                gp = fit_gp(inputs, target, rng=rng, fit_points=self._fit_points, restarts=1, maxiter=50)
            else:
                gp = fit_gp(inputs, target, rng=rng, fit_points=self._fit_points, restarts=0, maxiter=15, start=warm)
            self._theta[role] = gp.theta
            return gp.with_points(pend)

        fx = enc.encode(data["failed"]) if len(data["failed"]) else np.empty((0, enc.dim))
        if len(fx) > self._max_train // 2:
            fx = fx[rng.choice(len(fx), self._max_train // 2, replace=False)]
        if self._impute_failed and len(fx):
            # A design that cannot run counts as the worst value seen: EI leaves its neighbourhood.
            objective = fit("objective", np.concatenate([y[train], np.full(len(fx), y.max())]), np.vstack([xt, fx]))
        else:
            objective = fit("objective", y[train])
        constraints = [fit(f"constraint{j}", data["g"][train, j]) for j in range(data["g"].shape[1])]
        fail_gp = None
        if len(fx):
            fail_gp = fit("failed", np.concatenate([np.zeros(len(xt)), np.ones(len(fx))]), np.vstack([xt, fx]))

        order = np.argsort(key)[:5]
        cand = self._candidates(data["seen"], data["pos"][order])
        positions, cx = self._encode_candidates(cand)
        if len(positions) == 0:
            return self._random_unseen(data["seen"])
        # Probability of feasibility factor by factor; a candidate far less likely to be feasible
        # than the likeliest one (by PRUNE_LOG_P) cannot win and is not scored further.
        score = np.zeros(len(positions))
        factors = [(gp, 0.0) for gp in constraints] + ([(fail_gp, 0.5)] if fail_gp is not None else [])
        for gp, threshold in factors:
            mean, std = gp.predict(cx, fast=True)
            score += log_prob_below(mean, std, threshold)
            keep = score >= score.max() + PRUNE_LOG_P
            positions, cx, score = positions[keep], cx[keep], score[keep]
        if feasible.any():
            mean, std = objective.predict(cx, fast=True)
            score += log_expected_improvement(mean, std, float(y[feasible].min()))
        shuffled = rng.permutation(len(score))  # ties in random order
        return positions[shuffled[np.argsort(-score[shuffled], kind="stable")[:_RANKED]]]

    def _train_subset(self, key: np.ndarray) -> np.ndarray:
        n = len(key)
        if n <= self._max_train:
            return np.arange(n)
        order = np.argsort(key)
        half = self._max_train // 2
        rest = self._rng.choice(order[half:], self._max_train - half, replace=False)
        return np.concatenate([order[:half], rest])

    def _random_unseen(self, seen: np.ndarray) -> np.ndarray:
        keys = {self._key(p) for p in seen}
        draws = self._enc.random(self._rng, 64)
        fresh = [p for p in draws if self._key(p) not in keys]
        return np.asarray(fresh) if fresh else draws[:1]  # nearly exhausted: the wrapper draws again

    def reseed_rng(self) -> None:
        """Fresh randomness (Optuna calls this for thread workers)."""
        self._rng = np.random.default_rng()
        super().reseed_rng()
