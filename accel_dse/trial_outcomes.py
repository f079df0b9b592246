"""How trials ended, in the words the sweep and the report both use.

A trial is ``feasible``, broke a ``constraint``, is an ``infeasible`` design (the design cannot
run the workload: a result of the search, not an error), ``failed`` (an error: the evaluator
raised, or the trial was interrupted or lost) or ``other`` (running, pruned, waiting).
:func:`trial_outcomes` counts them; :func:`outcome_words` writes the counts as the sweep's
closing summary and the report print them (``"21 feasible, 0 broke a constraint, 9 infeasible
designs, 0 failed"``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["INFEASIBLE", "FAILURES", "reason_key", "trial_outcomes", "outcome_words"]

#: Trial ``status`` values (accel_dse.search.scoring.objective) that mean the design itself cannot run
#: or is not a valid design: a result of the search, not a failure of the tool.
INFEASIBLE = ("infeasible", "overflow", "invalid", "non-finite")
#: Statuses of real failures: the evaluator raised, or the trial was interrupted or lost.
FAILURES = ("error", "interrupted")

def reason_key(reason: str) -> str:
    """A reason without its design-specific figures, so that designs failing alike count together
    (a grouping key, never shown: :func:`trial_outcomes` keeps one example of each kind with its figures).

    ``"resnet18: op 'conv1': the ofmap buffer (64 KiB) holds 64 words ... needs 128"`` ->
    ``"resnet18: op 'conv1': the ofmap buffer holds # words ... needs #"``.
    """
    text = re.sub(r"\s*\([^()]*\d[^()]*\)", "", reason)  # parentheticals with figures
    text = re.sub(r"(?<![\w'=])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w'])", "#", text)
    return " ".join(text.split())


def trial_outcomes(trials: Sequence[Any], constraints: Sequence[Any]) -> dict[str, Any]:
    """Count trials by outcome: ``feasible``, ``constraint`` (by constraint), ``infeasible``
    (by reason kind: ``status: reason_key(reason)``), ``failed`` (by status: real failures),
    ``other`` (running, pruned, ...); ``examples`` maps each infeasible kind to its first trial
    ``(number, "status: reason")``, the reason with its figures."""
    out: dict[str, Any] = {"feasible": 0, "constraint": Counter(), "n_constraint": 0, "infeasible": Counter(),
                           "failed": Counter(), "other": Counter(), "examples": {}}
    for t in trials:
        state = getattr(t.state, "name", str(t.state))
        status = t.user_attrs.get("status")
        if state == "COMPLETE":
            values = t.user_attrs.get("constraint_values")
            values = values if isinstance(values, list) else []  # an old or edited study: garbage is none
            broken = [str(c) for c, v in zip(constraints, values, strict=False)
                      if isinstance(v, (int, float)) and v > 0]
            if broken or status == "constraint":
                out["n_constraint"] += 1
                out["constraint"].update(broken or ["a constraint"])
            else:
                out["feasible"] += 1
        elif state == "FAIL" and status in INFEASIBLE:
            reason = str(t.user_attrs.get("reason", ""))
            kind = f"{status}: {reason_key(reason)}"
            out["infeasible"][kind] += 1
            out["examples"].setdefault(kind, (t.number, f"{status}: {reason}"))
        elif state == "FAIL" and status == "constraint":
            out["n_constraint"] += 1
            out["constraint"]["a constraint"] += 1
        elif state == "FAIL":
            out["failed"][status or "failed (no status recorded)"] += 1
        else:
            out["other"][state.lower()] += 1
    return out


def outcome_words(outcome: dict[str, Any]) -> list[str]:
    """The counts of :func:`trial_outcomes` as words: ``["21 feasible", "0 broke a constraint",
    "9 infeasible designs", "0 failed", "1 running"]``."""
    n_infeasible = sum(outcome["infeasible"].values())
    parts = [f"{outcome['feasible']} feasible", f"{outcome['n_constraint']} broke a constraint",
             f"{n_infeasible} infeasible design{'' if n_infeasible == 1 else 's'}",
             f"{sum(outcome['failed'].values())} failed"]
    return parts + [f"{n} {state}" for state, n in sorted(outcome["other"].items())]
