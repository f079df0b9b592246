"""Gaussian-process regression for the ``bo`` sampler (numpy + scipy only).

A zero-mean GP on standardised targets with a Matern-5/2 kernel with one length scale per
input dimension (ARD), a signal variance and a noise variance:

``k(a, b) = s2 * (1 + sqrt(5) r + 5 r^2 / 3) * exp(-sqrt(5) r)``, ``r^2 = sum_j ((a_j - b_j) / l_j)^2``.

Hyperparameters maximise the log marginal likelihood (plus a weak log-normal prior on the
length scales) with L-BFGS-B and the analytic gradient, from a default start and a few
random ones. Inputs are expected in [0, 1] per dimension. Also the log of expected
improvement, computed without underflow far from the incumbent.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.linalg import cho_solve, cholesky, lapack, solve_triangular
from scipy.optimize import minimize
from scipy.special import erfcx, log_ndtr, ndtr

__all__ = ["GaussianProcess", "fit_gp", "matern52", "log_expected_improvement", "expected_improvement"]

_SQRT5 = math.sqrt(5.0)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
#: Bounds of the log hyperparameters: length scale, signal variance, noise variance.
_LOG_LS = (math.log(0.02), math.log(20.0))
_LOG_VAR = (math.log(0.05), math.log(20.0))
_LOG_NOISE = (math.log(1e-6), math.log(0.3))
#: Weak prior on each log length scale: normal, mean log(0.5), standard deviation 1.5.
_LS_PRIOR = (math.log(0.5), 1.5)
_JITTER = 1e-8


def _sq_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of ``a`` and of ``b`` (never negative)."""
    d2 = a @ b.T
    d2 *= a.dtype.type(-2.0)
    d2 += (a * a).sum(1)[:, None]
    d2 += (b * b).sum(1)[None, :]
    return np.maximum(d2, 0.0, out=d2)


def matern52(a: np.ndarray, b: np.ndarray, lengthscales: np.ndarray, variance: float) -> np.ndarray:
    """Matern-5/2 ARD kernel matrix between the rows of ``a`` (n, d) and ``b`` (m, d)."""
    dtype = a.dtype
    ls = np.asarray(lengthscales, dtype=dtype)
    r = _sq_dist(a / ls, b / ls)  # in place from here on: this is the sampler's hot loop
    r *= dtype.type(5.0)
    np.sqrt(r, out=r)
    k = np.exp(-r)
    poly = r * r
    poly *= dtype.type(1.0 / 3.0)
    poly += r
    poly += dtype.type(1.0)
    k *= poly
    k *= dtype.type(variance)
    return k


@dataclasses.dataclass(frozen=True)
class GaussianProcess:
    """A fitted GP: hyperparameters and the Cholesky factor of its training covariance.

    Attributes:
        x: Training inputs (n, d).
        z: Standardised training targets (n,).
        y_mean: Mean subtracted from the raw targets.
        y_scale: Scale the raw targets were divided by.
        lengthscales: One per input dimension.
        variance: Signal variance (standardised units).
        noise: Noise variance (standardised units).
        chol: Lower Cholesky factor of ``K + noise I``.
        alpha: ``(K + noise I)^-1 z``.
    """

    x: np.ndarray
    z: np.ndarray
    y_mean: float
    y_scale: float
    lengthscales: np.ndarray
    variance: float
    noise: float
    chol: np.ndarray
    alpha: np.ndarray

    @classmethod
    def build(cls, x: np.ndarray, z: np.ndarray, y_mean: float, y_scale: float, lengthscales: np.ndarray,
              variance: float, noise: float) -> GaussianProcess:
        """Factor the training covariance for fixed hyperparameters."""
        k = matern52(x, x, lengthscales, variance)
        k[np.diag_indices_from(k)] += noise + _JITTER
        chol = cholesky(k, lower=True, check_finite=False)
        alpha = cho_solve((chol, True), z, check_finite=False)
        return cls(x, z, y_mean, y_scale, np.asarray(lengthscales, dtype=float), variance, noise, chol, alpha)

    @property
    def theta(self) -> np.ndarray:
        """Log hyperparameters: length scales, signal variance, noise variance."""
        return np.log(np.concatenate([self.lengthscales, [self.variance, self.noise]]))

    def predict(self, xs: np.ndarray, *, fast: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation at ``xs`` (m, d), in the raw target's units.

        Args:
            xs: Query inputs.
            fast: Compute the cross covariance and the variance in float32 (for many candidates).
        """
        dtype = np.float32 if fast else np.float64
        ks = matern52(xs.astype(dtype, copy=False), self.x.astype(dtype), self.lengthscales, self.variance)
        mean = ks @ self.alpha.astype(dtype)
        v = solve_triangular(self.chol.astype(dtype), ks.T, lower=True, check_finite=False)
        var = self.variance - (v * v).sum(0)
        var = np.maximum(var.astype(np.float64), 1e-10 * self.variance)
        return self.y_mean + self.y_scale * mean.astype(np.float64), self.y_scale * np.sqrt(var)

    def with_points(self, xs: np.ndarray) -> GaussianProcess:
        """The same GP with ``xs`` added at their predicted mean (the kriging believer)."""
        if len(xs) == 0:
            return self
        mean, _ = self.predict(xs)
        z = np.concatenate([self.z, (mean - self.y_mean) / self.y_scale])
        return GaussianProcess.build(np.vstack([self.x, xs]), z, self.y_mean, self.y_scale, self.lengthscales,
                                     self.variance, self.noise)


def _neg_lml(theta: np.ndarray, x: np.ndarray, z: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative log marginal likelihood (minus the length-scale prior) and its gradient."""
    n, d = x.shape
    ls = np.exp(theta[:d])
    var, noise = math.exp(theta[d]), math.exp(theta[d + 1])
    xs = x / ls
    r = np.sqrt(5.0 * _sq_dist(xs, xs))
    e = np.exp(-r)
    m = (1.0 + r + r * r / 3.0) * e
    k = var * m
    k[np.diag_indices_from(k)] += noise + _JITTER
    try:
        chol = cholesky(k, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return 1e10, np.zeros_like(theta)
    alpha = cho_solve((chol, True), z, check_finite=False)
    kinv, info = lapack.dpotri(chol, lower=1)
    if info != 0:
        return 1e10, np.zeros_like(theta)
    kinv = np.tril(kinv) + np.tril(kinv, -1).T
    w = np.outer(alpha, alpha) - kinv
    mu, sd = _LS_PRIOR
    nll = 0.5 * z @ alpha + np.log(np.diag(chol)).sum() + 0.5 * n * math.log(2 * math.pi)
    nll += 0.5 * (((theta[:d] - mu) / sd) ** 2).sum()
    # dK/dlog l_j = var * 5/3 * (1 + r) exp(-r) * (x_aj - x_bj)^2 / l_j^2  (r includes sqrt 5)
    a = w * (var * 5.0 / 3.0 * (1.0 + r) * e)
    rows = a.sum(1)
    sq = xs * xs
    grad_ls = 0.5 * (2.0 * (sq * rows[:, None]).sum(0) - 2.0 * (xs * (a @ xs)).sum(0))
    grad = np.empty_like(theta)
    grad[:d] = -grad_ls + (theta[:d] - mu) / sd**2
    grad[d] = -0.5 * (w * (var * m)).sum()
    grad[d + 1] = -0.5 * noise * np.trace(w)
    return float(nll), grad


def fit_gp(
    x: np.ndarray,
    y: np.ndarray,
    *,
    rng: np.random.Generator,
    fit_points: int = 150,
    restarts: int = 2,
    maxiter: int = 60,
    start: np.ndarray | None = None,
) -> GaussianProcess:
    """Fit a GP to inputs ``x`` (n, d) in [0, 1] and raw targets ``y`` (n,).

    Args:
        x: Training inputs.
        y: Training targets (any units; standardised inside).
        rng: Randomness of the restarts and of the fitting subset.
        fit_points: Most points the hyperparameters are fitted on (a random subset beyond;
            the returned GP conditions on all of them).
        restarts: Random starts besides the default one.
        maxiter: L-BFGS-B iterations per start.
        start: Log hyperparameters to start from instead of the default start (a warm
            start: see :attr:`GaussianProcess.theta`).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = x.shape
    y_mean = float(y.mean())
    y_scale = float(y.std()) or 1.0
    z = (y - y_mean) / y_scale
    sub = np.arange(n) if n <= fit_points else rng.choice(n, fit_points, replace=False)
    bounds = [_LOG_LS] * d + [_LOG_VAR, _LOG_NOISE]
    default = np.concatenate([np.full(d, math.log(0.5)), [0.0, math.log(1e-3)]])
    starts = [default if start is None else np.clip(start, [b[0] for b in bounds], [b[1] for b in bounds])]
    for _ in range(restarts):
        starts.append(np.concatenate([rng.uniform(math.log(0.1), math.log(3.0), d),
                                      [rng.uniform(-1.0, 1.0), rng.uniform(math.log(1e-5), math.log(1e-2))]]))
    best_theta, best_value = starts[0], math.inf
    for start in starts:
        result = minimize(_neg_lml, start, args=(x[sub], z[sub]), jac=True, method="L-BFGS-B", bounds=bounds,
                          options={"maxiter": maxiter})
        if np.isfinite(result.fun) and result.fun < best_value:
            best_theta, best_value = result.x, float(result.fun)
    return GaussianProcess.build(x, z, y_mean, y_scale, np.exp(best_theta[:d]), math.exp(best_theta[d]),
                                 math.exp(best_theta[d + 1]))


def _log_h(z: np.ndarray) -> np.ndarray:
    """``log(z * Phi(z) + phi(z))``, accurate for very negative ``z``."""
    z = np.asarray(z, dtype=float)
    out = np.empty_like(z)
    hi = z > -1.0
    zh = z[hi]
    out[hi] = np.log(zh * ndtr(zh) + np.exp(-0.5 * zh * zh) / math.sqrt(2 * math.pi))
    zl = -z[~hi]  # > 1
    # h(z) = phi(z) * (1 - |z| * sqrt(pi/2) * erfcx(|z| / sqrt 2)); far out, h ~ phi(z) / z^2.
    tail = 1.0 - zl * math.sqrt(math.pi / 2) * erfcx(zl / math.sqrt(2))
    log_tail = np.where(zl < 1e3, np.log(np.maximum(tail, 1e-300)), -2.0 * np.log(zl))
    out[~hi] = -0.5 * zl * zl - _LOG_SQRT_2PI + log_tail
    return out


def log_expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """Log of ``E[max(best - Y, 0)]`` for ``Y ~ N(mean, std^2)`` (minimisation)."""
    std = np.maximum(std, 1e-12)
    return np.log(std) + _log_h((best - mean) / std)


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """``E[max(best - Y, 0)]`` for ``Y ~ N(mean, std^2)`` (minimisation)."""
    return np.exp(log_expected_improvement(mean, std, best))


def log_prob_below(mean: np.ndarray, std: np.ndarray, threshold: float = 0.0) -> np.ndarray:
    """``log P(Y <= threshold)`` for ``Y ~ N(mean, std^2)``."""
    return log_ndtr((threshold - mean) / np.maximum(std, 1e-12))
