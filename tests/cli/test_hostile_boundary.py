"""No traceback for user errors: OS errors, deep nesting, special files, a user's module exiting,
studies whose attributes another tool wrote, stdout on a full disk."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import sqlite3
import subprocess
import sys

import pytest
from hostile_testlib import one_line, snapshot
from report_testlib import make_study

DEEP = 50_000


@pytest.mark.parametrize("kind", ["design", "space"])
def test_deeply_nested_toml(run_cli, tmp_path, kind):
    path = tmp_path / f"{kind}.toml"
    path.write_text(f"[{kind if kind == 'design' else 'x'}]\nrows = 4\ncols = 4\nx = " + "[" * DEEP + "]" * DEEP + "\n")
    argv = ("design", "check", str(path)) if kind == "design" else ("sweep", "--space", str(path), "--storage",
                                                                      "memory:")
    line = one_line(*run_cli(*argv))
    assert f"{kind} file {str(path)!r} is nested too deeply to parse" in line


def test_design_and_space_files_must_be_regular(run_cli, tmp_path):
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    for argv, what in ((("design", "check", str(fifo)), "design file"),
                       (("sweep", "--space", str(fifo), "--storage", "memory:"), "space file"),
                       (("evaluate", "--design", "/dev/zero", "--workload", "gemm"), "design file")):
        line = one_line(*run_cli(*argv))
        assert what in line and "is not a regular file" in line, line


@pytest.mark.parametrize("body, expected, status", [
    ("raise SystemExit(3)", "workload 'hostile_mod:f': its module raised SystemExit(3)", 2),
    ("import sys\nsys.exit()", "workload 'hostile_mod:f': its module raised SystemExit(None)", 2),
    ("raise KeyboardInterrupt", None, 130),
])
def test_a_user_module_that_exits_on_import(run_cli, tmp_path, monkeypatch, body, expected, status):
    (tmp_path / "hostile_mod.py").write_text(body + "\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hostile_mod", raising=False)
    code, out, err = run_cli("workloads", "show", "hostile_mod:f")
    if expected is None:
        assert (code, err.strip()) == (130, "accel-dse: interrupted")
    else:
        assert expected in one_line(code, out, err, status=status)


def test_a_full_disk_while_writing_a_report(run_cli, tmp_path, monkeypatch):
    url = f"journal:{tmp_path / 's.journal'}"
    make_study(url, trials=4)
    real = pathlib.Path.write_text

    def full(self, *args, **kwargs):
        if self.name == "report.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    before = snapshot(tmp_path)
    line = one_line(*run_cli("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "r")))
    assert line.startswith("no space left on device (") and "report.json" in line
    assert snapshot(tmp_path) == before  # no report dir, no temp dir


def test_stdout_on_a_full_disk(cli_env, tmp_path):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "accel_dse", "workloads"], stdout=full, stderr=subprocess.PIPE,
                              text=True, env=cli_env, cwd=tmp_path, timeout=120)
    assert one_line(proc.returncode, "", proc.stderr) == "no space left on device"


FOREIGN = [
    ("study", "accel_dse.objectives", [[1]]),
    ("study", "accel_dse.objectives", [{"spec": 5}]),
    ("space", "workloads", 5),
    ("space", "constraints", None),
    ("trial", "config", "x"),
    ("trial", "metrics", 5),
    ("trial", "constraint_values", 5),
    ("trial", "config_hash", [1, [2]]),
]


@pytest.fixture(scope="module")
def base_study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("foreign")
    study = make_study(f"sqlite:///{folder / 'base.db'}", trials=6).study
    study._storage._backend.engine.dispose()
    return folder / "base.db"


@pytest.mark.parametrize("where, key, value", FOREIGN)
def test_foreign_study_contents(run_cli, tmp_path, base_study, where, key, value):
    db = tmp_path / "s.db"
    db.write_bytes(base_study.read_bytes())
    con = sqlite3.connect(db)
    if where == "trial":
        con.execute("update trial_user_attributes set value_json = ? where key = ?", (json.dumps(value), key))
    elif where == "study":
        con.execute("update study_user_attributes set value_json = ? where key = ?", (json.dumps(value), key))
    else:
        (space,) = con.execute("select value_json from study_user_attributes where key = 'accel_dse.space'").fetchone()
        doc = dict(json.loads(space), **{key: value})
        con.execute("update study_user_attributes set value_json = ? where key = 'accel_dse.space'", (json.dumps(doc),))
    con.commit()
    con.close()
    url = f"sqlite:///{db}"
    for argv in (("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "r")),
                 ("export", "--storage", url, "--study", "s", "--trial", "best", "--no-synth", "--workload", "gemm",
                  "--out", str(tmp_path / "e"))):
        code, out, err = run_cli(*argv)
        if code != 0:
            one_line(code, out, err)  # refused in one line, or
        assert "Traceback" not in err  # read as far as it makes sense
