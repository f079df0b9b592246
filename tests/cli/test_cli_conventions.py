"""Command-line conventions: ``--debug`` anywhere on the line; ``--json`` errors as one JSON object on stderr."""

from __future__ import annotations

import json
import sys

import pytest

from accel_dse.cli import main

BAD_DESIGN = ["design", "check", "nosuch"]


@pytest.mark.parametrize("argv", [
    ["--debug", *BAD_DESIGN],
    ["design", "--debug", "check", "nosuch"],
    [*BAD_DESIGN, "--debug"],
])
def test_debug_anywhere_shows_the_traceback_and_keeps_the_exit_status(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "ConfigError" in err
    assert err.rstrip().splitlines()[-1].startswith("accel-dse: error: design 'nosuch' is neither a design file")


def test_debug_keeps_the_exit_status_of_an_os_error(capsys, tmp_path):
    """An error outside accel-dse's own checks (a directory where a file is read) keeps its 2 too."""
    code = main(["--debug", "design", "check", str(tmp_path / "a" / "b.toml")])
    plain = main(["design", "check", str(tmp_path / "a" / "b.toml")])
    assert code == plain == 2


def test_without_debug_the_error_is_one_line(capsys):
    assert main(BAD_DESIGN) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("accel-dse: error: design 'nosuch'")


def test_debug_after_a_double_dash_is_an_argument_not_the_flag(capsys):
    assert main(["design", "check", "--", "--debug"]) == 2
    assert "'--debug' is neither a design file nor a preset" in capsys.readouterr().err


#: (argv without --json, kind, part of the message)
CASES = [
    (BAD_DESIGN, "config", "design 'nosuch' is neither a design file nor a preset"),
    (["sweep", "--storage", "memory:", "--trials", "0"], "search", "--trials must be a positive integer, not 0"),
    (["sweep", "--storage", "journal:/nonexistent-dir/x.journal", "--trials", "3"], "storage",
     "directory '/nonexistent-dir' of storage"),
    (["design", "check", "--rows", "12"], "usage", "unrecognized arguments: --rows"),
    (["design", "check"], "usage", "the following arguments are required"),
]


@pytest.mark.parametrize(("argv", "kind", "text"), CASES, ids=[c[1] + str(i) for i, c in enumerate(CASES)])
def test_json_error_is_one_object_on_stderr_with_the_same_exit_code(argv, kind, text, capsys):
    plain_code = main(argv)
    plain = capsys.readouterr()
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == plain_code == 2
    assert out == "" and err.count("\n") == 1
    record = json.loads(err)
    assert set(record) == {"error", "kind"} and record["kind"] == kind
    assert text in record["error"] and text in plain.err
    assert not plain.err.lstrip().startswith("{")  # without --json: text, as before



def test_a_missing_optional_extra_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    study = tmp_path / "study.db"
    assert main(["sweep", "--sampler", "random", "--trials", "3", "--storage", f"sqlite:///{study}",
                 "--study", "s", "--quiet"]) == 0
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the [report] extra were not installed
    argv = ["report", "--storage", f"sqlite:///{study}", "--study", "s", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert not (tmp_path / "r").exists()  # nothing half-written
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'accel-dse[report]'" in err
    assert main([*argv, "--json"]) == 2
    assert json.loads(capsys.readouterr().err)["kind"] == "missing-extra"
