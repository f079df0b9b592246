"""The check that closes the loop: a trial's recorded figure is the program walk the RTL is held to.

A sweep records, per trial and workload, the design's ``total_cycles``: the walk of the program the
compiler emits for it (``perf_model.figures.one_program``), and the name of that figure
(``figure_model``, ``perf_model.FIGURE_MODEL``). Before a design is simulated, ``accel-dse verify``
re-scores it with this model and compares: a trial recorded under another model (or none named: a
study from before the one figure) is refused with that reason, and a recorded figure that lies
further than ``perf_model.FIGURE_BOUND`` from the walk (an edited study, or a model that changed
under the same name) fails the trial. Simulated at full scale over the whole workload, the RTL's
total is then checked against the recorded figure itself (``_run``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["recorded_figure", "figure_problem"]


def recorded_figure(trial: Any, workload_spec: str) -> float | None:
    """The ``total_cycles`` the study recorded for ``trial`` on ``workload_spec`` (``None``: the
    study did not score that workload, so there is nothing recorded to hold the RTL to)."""
    scored = (trial.user_attrs.get("workloads") or {}).get(workload_spec)
    if not isinstance(scored, dict) or "total_cycles" not in scored:
        return None
    value = scored["total_cycles"]
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")


def figure_problem(trial: Any, config: Any, workload_spec: str) -> str:
    """``""`` when ``trial``'s recorded figure on ``workload_spec`` is this model's program walk for
    ``config`` (within ``perf_model.FIGURE_BOUND``) or nothing is recorded for that workload; else
    why not, in one line naming both figures."""
    import perf_model
    import workloads

    recorded = recorded_figure(trial, workload_spec)
    if recorded is None:
        return ""
    named = trial.user_attrs.get("figure_model")
    if named != perf_model.FIGURE_MODEL:
        return (f"the study was recorded under an older model (figure {named or 'not named'!r}, this model's is "
                f"{perf_model.FIGURE_MODEL!r}: the program walk): its recorded figures are not what the RTL runs; "
                "re-run the sweep with this version")
    result = perf_model.evaluate(config, workloads.resolve(workload_spec))
    walk = float(result.total["total_cycles"]) if result.status == "ok" else 0.0
    if not recorded == recorded or abs(recorded - walk) > perf_model.FIGURE_BOUND * max(walk, 1.0):
        deviation = f"{100.0 * (recorded - walk) / walk:+.3g} %" if walk else "the design is not feasible now"
        return (f"the recorded total_cycles {recorded:,.0f} on {workload_spec} is not the program walk "
                f"{walk:,.0f} ({deviation}; bound {100.0 * perf_model.FIGURE_BOUND:g} %)")
    return ""
