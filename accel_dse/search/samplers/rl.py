"""``rl``: a policy-gradient design agent written with JAX, as an Optuna sampler.

The agent builds one design per episode, one parameter at a time:

* **state** ``s_t``: the choices made so far (one-hot over every parameter's actions, zero for
  the parameters not chosen yet) and which parameter comes next (one-hot over parameters);
* **action** ``a_t``: the choice for parameter ``t``: a category, a power of two, or one of at
  most :data:`MAX_BINS` values spread over an integer or real range (log-spaced for log ranges);
* **policy** ``pi(a_t | s_t)``: a one-hidden-layer MLP (tanh) whose logits are masked to the
  actions of parameter ``t``; the output layer starts at zero, so the first designs are
  uniformly random;
* **reward**, given at the end of the episode from the study's trials:
  single objective ``r = -log(value)`` for a minimised metric (``+log`` for a maximised one),
  and a design that breaks a constraint earns its own ``r`` minus ``penalty`` (2) times its
  total relative excess (capped at 10): the best designs sit on a constraint's edge, and a
  design just over it is a near miss, not worse than every feasible one (that reward, used
  before, taught the agent to keep away from the edge: best/optimum 1.18 after 200 trials
  on the bench space, 1.10-1.13 with the penalty);
  several objectives ``r = -(Pareto rank) - 0.1 * mean z-score of the signed log values``, and
  a violation earns the worst feasible reward of the batch minus 1 minus the relative excess;
  an infeasible or invalid design 1 less than the worst of all.
* **update**: PPO's clipped surrogate (dual-clip for negative advantages) on the latest
  :data:`WINDOW` episodes every :data:`UPDATE_EVERY` new ones, advantage = reward minus the
  batch mean over the batch standard deviation (the baseline), plus an entropy bonus; Adam.
  Each trial stores its actions and their log-probability (system attributes ``rl:actions``,
  ``rl:logp``) for the importance ratio; trials made by other samplers or before a resume
  without them are mapped to the nearest actions and taken as drawn from the policy as it was
  before the update (so the clip still bounds each update).

The agent keeps no state outside the study: a resumed run or another worker retrains its
policy from the stored trials, so storage, resume and parallel workers work as for every
other sampler.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from accel_dse.search.samplers.design_sampler import DesignSampler
from accel_dse.search.space.design_space import DesignSpace, Param

__all__ = ["PolicyGradientSampler", "MAX_BINS", "WINDOW", "UPDATE_EVERY"]

#: Most actions an integer or real range is cut into.
MAX_BINS = 32
#: Episodes (the latest trials) in each policy update.
WINDOW = 32
#: New episodes between two updates.
UPDATE_EVERY = 8
_LEARNED_STATUS = ("ok", "constraint", "infeasible", "overflow", "invalid", "non-finite")


def _param_actions(param: Param) -> list[Any]:
    """The Optuna values a parameter's actions stand for."""
    dist = param.distribution()
    if param.kind == "choice":
        return list(param.values)
    if param.kind in ("pow2", "ordered"):
        return list(range(dist.low, dist.high + 1))  # type: ignore[attr-defined]
    low, high = float(param.low), float(param.high)
    if param.kind == "int":
        step = int(param.step or 1)
        count = (int(high) - int(low)) // step + 1
        if count <= MAX_BINS:
            return list(range(int(low), int(high) + 1, step))
        points = np.geomspace(low, high, MAX_BINS) if param.log else np.linspace(low, high, MAX_BINS)
        snapped = sorted({int(low) + step * int(round((p - low) / step)) for p in points})
        return [min(max(v, int(low)), int(high)) for v in snapped]
    if param.step is not None:
        count = int(round((high - low) / param.step)) + 1
        if count <= MAX_BINS:
            return [float(round(low + i * param.step, 12)) for i in range(count)]
        points = np.linspace(low, high, MAX_BINS)
        return sorted({float(round(low + param.step * round((p - low) / param.step), 12)) for p in points})
    points = np.geomspace(low, high, MAX_BINS) if param.log else np.linspace(low, high, MAX_BINS)
    return [float(p) for p in points]


def _nearest(param: Param, actions: list[Any], value: Any) -> int | None:
    """Index of the action closest to an Optuna ``value`` (``None`` if it matches none)."""
    if param.kind == "choice":
        for i, a in enumerate(actions):
            if a == value:
                return i
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    grid = np.asarray(actions, dtype=float)
    if param.log and v > 0:
        return int(np.argmin(np.abs(np.log(grid) - math.log(v))))
    return int(np.argmin(np.abs(grid - v)))


def pareto_ranks(points: np.ndarray) -> np.ndarray:
    """Non-domination rank (0 = Pareto front) of each row of ``points`` (minimisation)."""
    n = len(points)
    ranks = np.full(n, -1, dtype=np.int64)
    remaining = np.arange(n)
    rank = 0
    while remaining.size:
        sub = points[remaining]
        le = np.all(sub[:, None, :] <= sub[None, :, :], axis=2)
        lt = np.any(sub[:, None, :] < sub[None, :, :], axis=2)
        dominated = np.any(le & lt, axis=0)
        ranks[remaining[~dominated]] = rank
        remaining = remaining[dominated]
        rank += 1
    return ranks


class PolicyGradientSampler(DesignSampler):
    """Policy-gradient (PPO-clip / REINFORCE with a baseline) sampler over a design space.

    Args:
        space: The design space; its free parameters are the agent's actions.
        seed: Seed of the policy initialisation and of the action sampling.
        hidden: Hidden units of the policy MLP.
        learning_rate: Adam step size.
        epochs: Gradient steps per update.
        clip: PPO ratio clip (``1 +- clip``).
        entropy: Weight of the entropy bonus.
        penalty: One objective: reward lost per unit of total relative constraint excess.
    """

    def __init__(
        self,
        space: DesignSpace,
        *,
        seed: int | None = None,
        hidden: int = 64,
        learning_rate: float = 0.01,
        epochs: int = 4,
        clip: float = 0.2,
        entropy: float = 0.05,
        penalty: float = 2.0,
    ) -> None:
        import jax
        import jax.numpy as jnp

        super().__init__(space, seed=seed)
        self._jax, self._jnp = jax, jnp
        self._params = space.free_params
        self._actions = [_param_actions(p) for p in self._params]
        sizes = [len(a) for a in self._actions]
        self._offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        n_steps, n_act = len(sizes), int(sum(sizes))
        self._n_steps, self._n_act = n_steps, n_act
        current = np.zeros((n_steps, n_act), dtype=np.float32)
        before = np.zeros((n_steps, n_act), dtype=np.float32)
        for t, (off, size) in enumerate(zip(self._offsets, sizes, strict=True)):
            current[t, off:off + size] = 1.0
            before[t, :off] = 1.0
        self._current = jnp.asarray(current)
        self._before = jnp.asarray(before)
        self._position = jnp.eye(n_steps, dtype=jnp.float32)
        self._lr, self._epochs, self._clip, self._entropy = learning_rate, epochs, clip, entropy
        self._penalty = penalty
        self._seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
        self._key = jax.random.PRNGKey(self._seed)
        self._key, init_key = jax.random.split(self._key)
        n_in = n_act + n_steps
        self._net = {
            "w1": jax.random.normal(init_key, (n_in, hidden), dtype=jnp.float32) / math.sqrt(n_in),
            "b1": jnp.zeros(hidden, dtype=jnp.float32),
            "w2": jnp.zeros((hidden, n_act), dtype=jnp.float32),
            "b2": jnp.zeros(n_act, dtype=jnp.float32),
        }
        self._adam = (jax.tree_util.tree_map(jnp.zeros_like, self._net),
                      jax.tree_util.tree_map(jnp.zeros_like, self._net), 0)
        self._trained_upto = 0
        self._updates = 0
        self._sample_fn = jax.jit(self._sample_episode)
        self._step_fn = jax.jit(self._train_step)
        self._logp_fn = jax.jit(self._episode_logp)

    # -- the policy --------------------------------------------------------------------------
    def _logits(self, net: dict[str, Any], x: Any) -> Any:
        jnp = self._jnp
        h = jnp.tanh(x @ net["w1"] + net["b1"])
        return h @ net["w2"] + net["b2"]

    def _sample_episode(self, net: dict[str, Any], key: Any) -> tuple[Any, Any]:
        jax, jnp = self._jax, self._jnp

        def body(t: Any, carry: tuple[Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any]:
            chosen, key, logp, actions = carry
            x = jnp.concatenate([chosen, self._position[t]])
            logits = jnp.where(self._current[t] > 0, self._logits(net, x), -1e9)
            key, sub = jax.random.split(key)
            a = jax.random.categorical(sub, logits)
            logp = logp + jax.nn.log_softmax(logits)[a]
            return chosen.at[a].set(1.0), key, logp, actions.at[t].set(a)

        init = (jnp.zeros(self._n_act, jnp.float32), key, jnp.float32(0.0), jnp.zeros(self._n_steps, jnp.int32))
        _, _, logp, actions = jax.lax.fori_loop(0, self._n_steps, body, init)
        return actions, logp

    def _episode_logp(self, net: dict[str, Any], actions: Any) -> tuple[Any, Any]:
        """Log-probability and entropy of episodes ``actions`` (global action indices, (B, T))."""
        jax, jnp = self._jax, self._jnp
        onehot = jax.nn.one_hot(actions, self._n_act).sum(axis=1)  # (B, A)
        states = onehot[:, None, :] * self._before[None]  # (B, T, A)
        pos = jnp.broadcast_to(self._position, (actions.shape[0],) + self._position.shape)
        logits = self._logits(net, jnp.concatenate([states, pos], axis=-1))
        logits = jnp.where(self._current[None] > 0, logits, -1e9)
        logsm = jax.nn.log_softmax(logits, axis=-1)
        chosen = jnp.take_along_axis(logsm, actions[..., None], axis=-1)[..., 0]
        entropy = -(jnp.exp(logsm) * jnp.where(self._current[None] > 0, logsm, 0.0)).sum(-1)
        return chosen.sum(-1), entropy.sum(-1)

    def _loss(self, net: dict[str, Any], actions: Any, old_logp: Any, has_old: Any, adv: Any, weight: Any) -> Any:
        jax, jnp = self._jax, self._jnp
        logp, entropy = self._episode_logp(net, actions)
        old = jnp.where(has_old, old_logp, jax.lax.stop_gradient(logp))
        ratio = jnp.exp(jnp.clip(logp - old, -20.0, 20.0))
        surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - self._clip, 1 + self._clip) * adv)
        surrogate = jnp.where(adv < 0, jnp.maximum(surrogate, 3.0 * adv), surrogate)
        total = jnp.maximum(weight.sum(), 1.0)
        return -((surrogate + self._entropy * entropy) * weight).sum() / total

    def _train_step(self, net: dict[str, Any], adam: tuple[Any, Any, Any], batch: tuple[Any, ...]) -> tuple[Any, Any]:
        jax, jnp = self._jax, self._jnp
        grads = jax.grad(self._loss)(net, *batch)
        m, v, t = adam
        t = t + 1
        m = jax.tree_util.tree_map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
        v = jax.tree_util.tree_map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
        scale = self._lr * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        net = jax.tree_util.tree_map(lambda p, a, b: p - scale * a / (jnp.sqrt(b) + 1e-8), net, m, v)
        return net, (m, v, t)

    # -- episodes from the study -------------------------------------------------------------
    def _episode(self, trial: FrozenTrial) -> tuple[np.ndarray, float | None] | None:
        stored = trial.system_attrs.get("rl:actions")
        if stored is not None and len(stored) == self._n_steps:
            actions = np.asarray(stored, dtype=np.int64)
            if np.all(actions >= 0) and all(a < len(acts) for a, acts in zip(actions, self._actions, strict=True)):
                logp = trial.system_attrs.get("rl:logp")
                return actions, float(logp) if logp is not None else None
        indices = []
        for param, acts in zip(self._params, self._actions, strict=True):
            if param.name not in trial.params:
                return None
            index = _nearest(param, acts, trial.params[param.name])
            if index is None:
                return None
            indices.append(index)
        return np.asarray(indices, dtype=np.int64), None

    def _rewards(self, trials: Sequence[FrozenTrial]) -> np.ndarray:
        objectives = self._space.objectives
        n = len(trials)
        good = np.zeros(n, dtype=bool)
        excess = np.zeros(n)
        scores = np.zeros((n, len(objectives)))
        for i, t in enumerate(trials):
            if t.state != TrialState.COMPLETE or t.values is None:
                continue
            cv = t.user_attrs.get("constraint_values") or []
            over = [max(0.0, float(v)) / max(abs(c.bound), 1e-12) for v, c in zip(cv, self._space.constraints,
                                                                                 strict=False)]
            excess[i] = sum(over)
            good[i] = excess[i] == 0
            for j, (o, v) in enumerate(zip(objectives, t.values, strict=True)):
                scores[i, j] = o.sign * (math.log(v) if v > 0 else v)
        rewards = np.zeros(n)
        complete = np.array([t.state == TrialState.COMPLETE for t in trials])
        if good.any():
            if len(objectives) == 1:
                rewards[good] = -scores[good, 0]
            else:
                sub = scores[good]
                z = (sub - sub.mean(0)) / (sub.std(0) + 1e-12)
                rewards[good] = -pareto_ranks(sub) - 0.1 * z.mean(1)
            floor = rewards[good].min()
        else:
            floor = 0.0
        violated = complete & ~good
        if len(objectives) == 1:
            rewards[violated] = -scores[violated, 0] - self._penalty * np.minimum(excess[violated], 10.0)
        else:
            rewards[violated] = floor - 1.0 - np.minimum(excess[violated], 10.0)
        lowest = rewards[complete].min() if complete.any() else floor
        rewards[~complete] = lowest - 1.0
        return rewards

    def _maybe_train(self, study: Study) -> None:
        trials = [
            t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
            if t.state == TrialState.COMPLETE or t.user_attrs.get("status") in _LEARNED_STATUS
        ]
        if len(trials) - self._trained_upto < UPDATE_EVERY:
            return
        epochs = self._epochs if self._updates else self._epochs * 4
        self._trained_upto = len(trials)
        recent = trials[-WINDOW:]
        drawn = [(t, self._episode(t)) for t in recent]
        episodes = [(t, e) for t, e in drawn if e is not None]
        if len(episodes) < 2:
            return
        rewards = self._rewards([t for t, _ in episodes])
        adv = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
        jnp = self._jnp
        actions = np.zeros((WINDOW, self._n_steps), dtype=np.int32)
        old = np.zeros(WINDOW, dtype=np.float32)
        has_old = np.zeros(WINDOW, dtype=bool)
        advantage = np.zeros(WINDOW, dtype=np.float32)
        weight = np.zeros(WINDOW, dtype=np.float32)
        for i, (_, (acts, logp)) in enumerate(episodes):
            actions[i] = acts + self._offsets
            if logp is not None:
                old[i], has_old[i] = logp, True
            advantage[i], weight[i] = adv[i], 1.0
        # Episodes without a recorded behaviour log-probability count as drawn from the policy
        # as it was before this update, so PPO's clip bounds how far one update moves it.
        current, _ = self._logp_fn(self._net, jnp.asarray(actions))
        old = np.where(has_old, old, np.asarray(current))
        batch = (jnp.asarray(actions), jnp.asarray(old), jnp.asarray(weight > 0), jnp.asarray(advantage),
                 jnp.asarray(weight))
        for _ in range(epochs):
            self._net, self._adam = self._step_fn(self._net, self._adam, batch)
        self._updates += 1

    # -- the BaseSampler interface ---------------------------------------------------------------
    def _design(self, study: Study, trial: FrozenTrial) -> dict[str, Any]:
        """Train on new trials if enough arrived, then sample one episode (a design)."""
        self._maybe_train(study)
        self._key, sub = self._jax.random.split(self._key)
        actions, logp = self._sample_fn(self._net, sub)
        local = np.asarray(actions, dtype=np.int64) - self._offsets
        params = {p.name: self._actions[t][int(local[t])] for t, p in enumerate(self._params)}
        storage = study._storage
        storage.set_trial_system_attr(trial._trial_id, "rl:actions", [int(a) for a in local])
        storage.set_trial_system_attr(trial._trial_id, "rl:logp", float(logp))
        return params

    def reseed_rng(self) -> None:
        """Draw a fresh action-sampling key (Optuna calls this for thread workers)."""
        self._key = self._jax.random.PRNGKey(int.from_bytes(os.urandom(4), "little"))
        super().reseed_rng()
