"""``--force`` deletes nothing accel-dse did not write; protected directories are refused outright."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hostile_testlib import one_line, snapshot


def _user_files(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "thesis.tex").write_text("years of work")
    (folder / "data").mkdir()
    (folder / "data" / "run1.csv").write_text("1,2,3\n")


@pytest.mark.parametrize("command", ["export", "report"])
def test_force_keeps_a_directory_of_user_files(run_cli, tmp_path, command):
    target = tmp_path / "work"
    _user_files(target)
    before = snapshot(tmp_path)
    args = (["export", "--design", "tiny", "--no-synth"] if command == "export"
            else ["report", "--storage", f"sqlite:///{tmp_path / 'none.db'}", "--study", "s"])
    line = one_line(*run_cli(*args, "--out", str(target), "--force"))
    assert "not an accel-dse output" in line and str(target) in line
    assert snapshot(tmp_path) == before


def test_force_on_the_current_directory_and_its_parents(run_cli, tmp_path, monkeypatch):
    here = tmp_path / "a" / "b"
    _user_files(here)
    monkeypatch.chdir(here)
    before = snapshot(tmp_path)
    for out, why in ((".", "the current directory"), (str(here), "the current directory"),
                     ("..", "a parent of the current directory"), (str(tmp_path), "a parent of the current directory")):
        line = one_line(*run_cli("export", "--design", "tiny", "--no-synth", "--out", out, "--force"))
        assert why in line and repr(out) in line, line
        line = one_line(*run_cli("export", "--design", "tiny", "--no-synth", "--out", out))
        assert why in line, line
    assert snapshot(tmp_path) == before
    assert Path.cwd() == here


def test_force_on_root_home_and_a_mount_point(run_cli, tmp_path, monkeypatch):
    home = tmp_path / "home"
    _user_files(home)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    before = snapshot(home)
    assert os.path.ismount("/proc")
    for out, why in (("/", "the file system root"), (str(home), "your home directory"), ("~", "your home directory"),
                     ("/proc", "a mount point")):
        line = one_line(*run_cli("export", "--design", "tiny", "--no-synth", "--out", out, "--force"))
        assert why in line, line
    assert snapshot(home) == before


def test_force_replaces_an_earlier_export_but_not_a_file_added_to_it(run_cli, tmp_path):
    out = tmp_path / "exp"
    code, _, err = run_cli("export", "--design", "tiny", "--no-synth", "--out", str(out))
    assert code == 0, err
    marker = json.loads((out / ".accel-dse-output").read_text())
    assert marker["written_by"] == "accel-dse" and set(marker["files"]) == {
        p.name for p in out.iterdir() if p.name != ".accel-dse-output"}
    (out / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    line = one_line(*run_cli("export", "--design", "tiny", "--no-synth", "--out", str(out), "--force"))
    assert "'notes.txt'" in line and "did not write" in line
    assert snapshot(tmp_path) == before
    (out / "notes.txt").unlink()
    (out / "sim_build" / "icarus").mkdir(parents=True)  # what its run.py leaves behind
    code, _, err = run_cli("export", "--design", "tiny", "--no-synth", "--out", str(out), "--force")
    assert code == 0, err
    assert not (out / "sim_build").exists() and (out / "design.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]  # no temp or old dir left


def test_a_forged_marker_does_not_cover_unlisted_files(run_cli, tmp_path):
    out = tmp_path / "exp"
    _user_files(out)
    (out / ".accel-dse-output").write_text(json.dumps({"written_by": "accel-dse", "files": ["thesis.tex"]}))
    before = snapshot(tmp_path)
    line = one_line(*run_cli("export", "--design", "tiny", "--no-synth", "--out", str(out), "--force"))
    assert "'data'" in line and "did not write" in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("out", ["", "   ", "~nosuchuser_accel/x", "x" * 300])
def test_unusable_out_paths(run_cli, tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    line = one_line(*run_cli("export", "--design", "tiny", "--no-synth", "--out", out))
    assert "--out" in line
    assert list(tmp_path.iterdir()) == []
