"""What a user sees of a finished sweep study through plain Optuna (as optuna-dashboard reads it)."""

from __future__ import annotations

import io
import json
import math
from wsgiref.util import setup_testing_defaults

import optuna
import optuna_dashboard
import pytest
from optuna.trial import TrialState
from search_testlib import make_space, standin_evaluator

from accel_dse.search import SweepConfig, run_sweep
from accel_dse.search.study.dashboard import NOTE_PIECE_CHARS, write_study_note

BOUND_MM2 = 1.7  # about the median area of the stand-in designs: half are infeasible


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    return f"sqlite:///{tmp_path_factory.mktemp('dash')}/study.db"


@pytest.fixture(scope="module")
def finished(url):
    space = make_space(constraints=[f"area_mm2 <= {BOUND_MM2}"])
    run_sweep(SweepConfig(space=space, evaluator=standin_evaluator(space), storage=url, study_name="dash",
                          sampler="random", n_trials=40, seed=3))
    return optuna.load_study(study_name="dash", storage=url)  # the URL a user gives optuna-dashboard


def test_objective_names_are_the_study_metric_names(finished):
    assert finished.metric_names == ["edp"]


def test_each_scored_trial_has_the_decoded_design_and_metrics_as_flat_scalars(finished):
    scored = [t for t in finished.get_trials() if t.state == TrialState.COMPLETE]
    assert scored
    for t in scored:
        flat = {k: v for k, v in t.user_attrs.items() if k.startswith(("design.", "metric."))}
        assert all(isinstance(v, (bool, int, float, str)) for v in flat.values())
        # The decoded size, not the encoded parameter: log2_rows = 5 is shown as design.rows = 32.
        assert flat["design.rows"] == 2 ** t.params["log2_rows"]
        assert flat["design.dataflow"] == t.params["dataflow"]
        assert flat["metric.edp"] == pytest.approx(t.value)
        assert t.user_attrs["feasible"] is (flat["metric.area_mm2"] <= BOUND_MM2)


def test_the_feasible_best_is_marked_and_is_what_optuna_calls_best(finished):
    complete = [t for t in finished.get_trials() if t.state == TrialState.COMPLETE]
    feasible = [t for t in complete if t.user_attrs["metric.area_mm2"] <= BOUND_MM2]
    best = min(feasible, key=lambda t: t.value)
    assert finished.user_attrs["accel_dse.best_feasible"] == [best.number]
    assert finished.best_trial.number == best.number  # Optuna's own best respects the constraint
    # What a rank-by-value view (optuna-dashboard 0.21) would put first breaks the area budget here.
    by_value = min(complete, key=lambda t: t.value)
    assert by_value.user_attrs["metric.area_mm2"] > BOUND_MM2 and math.isfinite(by_value.value)


def _dashboard(url: str, method: str, path: str, body: dict | None = None) -> tuple[str, dict]:
    """One request to optuna-dashboard's own web API (its WSGI app, in this process): (status, JSON)."""
    environ: dict = {}
    setup_testing_defaults(environ)
    data = json.dumps(body).encode() if body is not None else b""
    environ.update(REQUEST_METHOD=method, PATH_INFO=path, CONTENT_TYPE="application/json",
                   CONTENT_LENGTH=str(len(data)), **{"wsgi.input": io.BytesIO(data)})
    status: list[str] = []
    out = b"".join(optuna_dashboard.wsgi(url)(environ, lambda s, headers, exc=None: status.append(s)))
    return status[0], json.loads(out) if out else {}


def test_the_dashboard_shows_the_feasible_best_in_the_study_note(finished, url):
    status, detail = _dashboard(url, "GET", f"/api/studies/{finished._study_id}")
    assert status.startswith("200"), detail
    complete = [t for t in finished.get_trials() if t.state == TrialState.COMPLETE]
    best = min((t for t in complete if t.user_attrs["metric.area_mm2"] <= BOUND_MM2), key=lambda t: t.value)
    by_value = min(complete, key=lambda t: t.value)
    # The dashboard's own best trial is the one that breaks the area budget ...
    assert [t["number"] for t in detail["best_trials"]] == [by_value.number]
    # ... and its study note names the feasible one, with its objective value and decoded design.
    note = detail["note"]["body"]
    assert f"**Trial {best.number}**" in note and f"Trial {by_value.number}**" not in note
    assert f"edp = {best.value:.4g}" in note
    assert f"rows {best.user_attrs['design.rows']}," in note
    assert f"area_mm2 <= {BOUND_MM2:g}" in note
    assert detail["note"]["version"] >= 1


def test_a_note_rewrite_is_read_back_whole_by_the_dashboard_and_its_edits_still_work(tmp_path):
    url = f"sqlite:///{tmp_path}/notes.db"
    study = optuna.create_study(study_name="notes", storage=url)
    long_body = "".join(f"line {i}\n" for i in range(2 * NOTE_PIECE_CHARS // 5))  # three pieces
    assert len(long_body) > 2 * NOTE_PIECE_CHARS
    write_study_note(study, long_body)
    status, detail = _dashboard(url, "GET", f"/api/studies/{study._study_id}")
    assert detail["note"]["body"] == long_body
    version = detail["note"]["version"]
    assert write_study_note(study, "short") is True
    assert write_study_note(study, "short") is False  # unchanged: no new version
    _, detail = _dashboard(url, "GET", f"/api/studies/{study._study_id}")
    assert detail["note"] == {"version": version + 1, "body": "short"}  # the old pieces are blanked
    # A dashboard user's edit (based on the version it shows) is accepted, and read back.
    status, _ = _dashboard(url, "PUT", f"/api/studies/{study._study_id}/note", {"version": version + 2, "body": "mine"})
    assert status.startswith("20"), status
    assert write_study_note(study, "short") is True  # the sweep writes its note again over the user's
    _, detail = _dashboard(url, "GET", f"/api/studies/{study._study_id}")
    assert detail["note"] == {"version": version + 3, "body": "short"}
