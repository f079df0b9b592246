"""``accel-dse sweep`` bad input: one clear line on stderr, exit 2, the study untouched."""

from __future__ import annotations

import re
import socket

import pytest
from search_testlib import SMALL_SPACE_TOML, standin_evaluator

from accel_dse.search import SweepConfig, load_space, run_sweep
from tests.cli_testlib import assert_one_line_error

# The small space on a real builtin workload (the CLI resolves workloads before opening storage).
MLP_SPACE = SMALL_SPACE_TOML.replace('workloads = ["a"]', 'workloads = ["mlp"]')


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _space(tmp_path, text=MLP_SPACE, name="s.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


BAD_SPACES = [
    (MLP_SPACE.replace('dataflow = ["ws", "os", "is"]', "dataflow = []"), r"params.dataflow: the list of choices"),
    (MLP_SPACE.replace('rows = { low = 2, high = 64', 'rows = { low = 128, high = 64'),
     r"params.rows: low must be <= high, not low=128 > high=64"),
    (MLP_SPACE.replace("double_buffered", "double_bufferd"), r"unknown field 'double_bufferd'.*'double_buffered'"),
    (MLP_SPACE.replace('objectives = ["edp"]', 'objectives = ["speed"]'), r"objective must be one of .* not 'speed'"),
    (MLP_SPACE.replace('objectives = ["edp"]', 'objectives = ["edp"]\nconstraints = ["watts <= 2"]'),
     r"unknown metric 'watts'"),
    (MLP_SPACE.replace('workloads = ["mlp"]', 'workloads = ["resnet99"]'), r"resnet99"),
]


@pytest.mark.parametrize(("text", "pattern"), BAD_SPACES)
def test_bad_space_files(run_cli, in_tmp, text, pattern):
    code, out, err = run_cli("sweep", "--space", _space(in_tmp, text), "--trials", "5")
    assert_one_line_error(code, out, err, pattern)
    assert not (in_tmp / "runs").exists()


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["--sampler", "anneal"], r"unknown sampler 'anneal' \(samplers: tpe, nsga2, cmaes, random, grid, rl, bo\)"),
        (["--trials", "abc"], r"--trials must be an integer, not 'abc'"),
        (["--trials", "0"], r"--trials must be a positive integer, not 0"),
        (["--jobs", "-1"], r"--jobs must be a positive integer, not -1"),
        (["--timeout", "soon"], r"--timeout must be a positive number of seconds, not 'soon'"),
        (["--space", "edge-int9"], r"space 'edge-int9' is neither a space file nor a shipped space"),
        (["--storage", "sqlite:/oops.db"], r"storage URL 'sqlite:/oops.db' is malformed"),
        (["--storage", "mysq://u@h/db"], r"unknown database kind 'mysq'"),
        (["--storage", "memory:", "--jobs", "2"], r"--jobs 2 needs a storage several processes can share"),
        (["--sampler", "cmaes", "--space", "edge-mix"], r"sampler cmaes takes a single objective, not 2"),
        (["--sampler", "grid", "--space", "datacenter-bert"], r"continuous range .* needs a step"),
    ],
)
def test_bad_options(run_cli, in_tmp, args, pattern):
    code, out, err = run_cli("sweep", *args)
    assert_one_line_error(code, out, err, pattern)
    assert list(in_tmp.iterdir()) == []  # no runs/ directory, no study file


def test_mistyped_sqlite_directory_creates_nothing(run_cli, in_tmp):
    space = _space(in_tmp)
    code, out, err = run_cli("sweep", "--space", space, "--storage", f"sqlite:///{in_tmp}/rnus/x/study.db")
    assert_one_line_error(code, out, err, r"directory '.*/rnus/x' of storage .* does not exist")
    assert sorted(p.name for p in in_tmp.iterdir()) == ["s.toml"]
    code, out, err = run_cli("sweep", "--space", space, "--storage", f"journal:{in_tmp}/nope/j.log")
    assert_one_line_error(code, out, err, r"directory '.*/nope' of storage")
    code, out, err = run_cli("sweep", "--space", space, "--out-dir", f"{in_tmp}/a/b/c")
    assert_one_line_error(code, out, err, r"directory '.*/a/b' of --out-dir '.*/a/b/c' does not exist")
    assert sorted(p.name for p in in_tmp.iterdir()) == ["s.toml"]


def test_unreachable_postgres_is_one_line(run_cli, in_tmp):
    url = f"postgresql://me:secret@127.0.0.1:{_free_port()}/dse"
    code, out, err = run_cli("sweep", "--space", _space(in_tmp), "--storage", url, "--trials", "3")
    assert_one_line_error(code, out, err, r"cannot open storage 'postgresql://me:\*\*\*@127.0.0.1:\d+/dse'")
    assert "secret" not in err and "Traceback" not in err


def test_existing_study_with_other_objectives_is_refused_untouched(run_cli, in_tmp):
    space_file = _space(in_tmp)
    space = load_space(space_file)
    url = f"sqlite:///{in_tmp}/study.db"
    run_sweep(SweepConfig(space=space, evaluator=standin_evaluator(workloads=[("a", 1.0)]), storage=url,
                          study_name="mine", sampler="random", n_trials=6, seed=1))
    def snapshot():
        import optuna

        study = optuna.load_study(study_name="mine", storage=url)
        trials = [(t.number, t.state, t.params, t.values, t.user_attrs) for t in study.get_trials()]
        return study.user_attrs, study.directions, trials, optuna.get_all_study_names(url)

    before = snapshot()
    other = _space(in_tmp, MLP_SPACE.replace('objectives = ["edp"]', 'objectives = ["latency", "area"]'), "o.toml")
    code, out, err = run_cli("sweep", "--space", other, "--storage", url, "--study", "mine", "--trials", "20")
    assert_one_line_error(code, out, err,
                          r"study 'mine' in sqlite:///.* has objectives \['edp'\], not \['latency', 'area'\]"
                          r".*use another --study name")
    changed = _space(in_tmp, MLP_SPACE.replace("[4.0, 16.0, 64.0]", "[4.0, 16.0]"), "c.toml")
    code, out, err = run_cli("sweep", "--space", changed, "--storage", url, "--study", "mine", "--trials", "20")
    assert_one_line_error(code, out, err, r"study 'mine' .* was made from another design space")
    assert snapshot() == before


def test_list_spaces(run_cli):
    code, out, err = run_cli("sweep", "--list-spaces")
    assert code == 0 and "edge-int8" in out and "edge-mix" in out


def test_grid_through_the_cli_on_the_real_model(run_cli, in_tmp):
    tiny = MLP_SPACE.replace('rows = { low = 2, high = 64, scale = "pow2" }', "rows = [8, 16]").replace(
        'cols = { low = 2, high = 64, scale = "pow2" }', "cols = [8, 16]")
    code, out, err = run_cli("sweep", "--space", _space(in_tmp, tiny), "--sampler", "grid", "--grid-keep", "3",
                             "--out-dir", str(in_tmp / "g"))
    assert code == 0, err
    assert "grid: 1,440 designs scored" in out and "best designs" in out
    assert "3 kept as trials (the best;" in out  # --grid-keep 3: the study holds 3 trials, and says so
    assert "grid: 1,440/1,440 designs scored" in err  # the progress line


def test_progress_lines_on_a_pipe(tmp_path):
    import io

    from search_testlib import make_space

    from accel_dse.search.study.progress import Progress

    space = make_space()
    result = run_sweep(SweepConfig(space=space, evaluator=standin_evaluator(space), storage="memory:",
                                   study_name="p", sampler="random", n_trials=8, seed=0))
    stream = io.StringIO()
    bar = Progress(stream, space, total=10)
    bar.update(result.study)
    bar.update(result.study)  # within the period: not drawn again
    bar.close(result.study)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    best = min(t.value for t in result.study.get_trials() if t.value is not None)
    assert lines[-1].startswith("[################----] 8/10 trials  best edp: ")
    shown = re.search(r"best edp: ([0-9.]+) ([munµp]?)J·s \(trial \d+\)", lines[-1])
    assert shown, lines[-1]  # an SI prefix, not 2.863e-05 J*s
    prefix = {"": 1.0, "m": 1e-3, "µ": 1e-6, "u": 1e-6, "n": 1e-9, "p": 1e-12}[shown.group(2)]
    assert float(shown.group(1)) * prefix == pytest.approx(best, rel=5e-3)
    assert 1.0 <= float(shown.group(1)) < 1000.0 and lines[-1].endswith("trials/s")
