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


def _force_export(run_cli, out):
    return run_cli("export", "--design", "tiny", "--no-synth", "--out", str(out), "--force")


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_a_forged_name_list_marker_is_refused_naming_the_marker(run_cli, tmp_path):
    out = tmp_path / "exp"
    _user_files(out)
    (out / "keepme.txt").write_text("mine")
    (out / ".accel-dse-output").write_text(json.dumps(
        {"written_by": "accel-dse", "files": ["thesis.tex", "keepme.txt", "data"]}))
    before = snapshot(tmp_path)
    line = one_line(*_force_export(run_cli, out))
    assert "'.accel-dse-output'" in line and "SHA-256" in line
    assert snapshot(tmp_path) == before


def test_a_forged_record_that_does_not_match_the_file_is_refused(run_cli, tmp_path):
    out = tmp_path / "exp"
    out.mkdir()
    (out / "keepme.txt").write_text("mine")
    for size, digest in ((4, _sha256(b"other")), (3, _sha256(b"mine"))):
        (out / ".accel-dse-output").write_text(json.dumps({
            "written_by": "accel-dse", "format": 2, "kind": "export",
            "files": {"keepme.txt": {"size": size, "sha256": digest}}}))
        before = snapshot(tmp_path)
        line = one_line(*_force_export(run_cli, out))
        assert "'keepme.txt'" in line and "changed since accel-dse wrote it" in line
        assert snapshot(tmp_path) == before


@pytest.mark.parametrize("place", ["sim_build/precious.txt", "__pycache__/precious.pyc", "sim_build/icarus/x.txt"])
def test_a_report_folder_exempts_no_build_folder(run_cli, tmp_path, place):
    from accel_dse.export import atomic_dir

    out = tmp_path / "rep"
    with atomic_dir(out, kind="report") as tmp:  # as write_report makes it
        (tmp / "report.json").write_text("{}\n")
        (tmp / "index.html").write_text("<html></html>\n")
    (out / place).parent.mkdir(parents=True, exist_ok=True)
    (out / place).write_text("years of work")
    before = snapshot(tmp_path)
    line = one_line(*run_cli("export", "--design", "tiny", "--no-synth", "--out", str(out), "--force"))
    assert repr(place.split("/")[0]) in line and "did not write" in line
    assert snapshot(tmp_path) == before


def test_an_export_build_folder_is_accepted_only_as_its_runner_recorded_it(run_cli, tmp_path):
    out = tmp_path / "exp"
    code, _, err = run_cli("export", "--design", "tiny", "--no-synth", "--out", str(out))
    assert code == 0, err
    build = out / "sim_build"
    (build / "icarus").mkdir(parents=True)
    (build / "icarus" / "sim.vvp").write_text("#! vvp\n")
    manifest = {"written_by": "accel-dse run.py", "format": 2,
                "files": {"icarus/sim.vvp": {"size": 7, "sha256": _sha256(b"#! vvp\n")}}}
    (build / ".accel-dse-build").write_text(json.dumps(manifest))
    (build / "precious.txt").write_text("mine")  # in the build folder, but not recorded by the runner
    before = snapshot(tmp_path)
    line = one_line(*_force_export(run_cli, out))
    assert "'sim_build/precious.txt'" in line and "did not write" in line
    assert snapshot(tmp_path) == before
    (build / "precious.txt").unlink()
    (build / "icarus" / "sim.vvp").write_text("#! vvp, edited\n")  # recorded, but changed since
    line = one_line(*_force_export(run_cli, out))
    assert "'sim_build/icarus/sim.vvp'" in line and "changed" in line
    (build / "icarus" / "sim.vvp").write_text("#! vvp\n")
    code, _, err = _force_export(run_cli, out)
    assert code == 0, err
    assert not build.exists() and (out / "design.json").is_file()


@pytest.mark.parametrize("change", ["edit", "link", "folder"])
def test_a_changed_or_added_entry_in_an_export_is_refused(run_cli, tmp_path, change):
    out = tmp_path / "exp"
    code, _, err = run_cli("export", "--design", "tiny", "--no-synth", "--out", str(out))
    assert code == 0, err
    marker = json.loads((out / ".accel-dse-output").read_text())
    assert marker["kind"] == "export" and marker["files"]["design.json"]["sha256"] == _sha256(
        (out / "design.json").read_bytes())
    if change == "edit":
        (out / "README.md").write_text((out / "README.md").read_text() + "my notes\n")
        name = "README.md"
    elif change == "link":
        (out / "mine").symlink_to(tmp_path)
        name = "mine"
    else:
        (out / "results").mkdir()
        name = "results"
    before = snapshot(tmp_path)
    line = one_line(*_force_export(run_cli, out))
    assert repr(name) in line
    assert snapshot(tmp_path) == before


def test_a_file_added_between_the_check_and_the_replace_is_not_deleted(run_cli, tmp_path, monkeypatch):
    import accel_dse.output_dir as writer

    out = tmp_path / "exp"
    code, _, err = run_cli("export", "--design", "tiny", "--no-synth", "--out", str(out))
    assert code == 0, err
    real_replace = writer._replace

    def late_write(tmp, final, **kwargs):
        (final / "late.txt").write_text("written while the export ran")
        return real_replace(tmp, final, **kwargs)

    monkeypatch.setattr(writer, "_replace", late_write)
    line = one_line(*_force_export(run_cli, out))
    assert "'late.txt'" in line
    assert (out / "late.txt").read_text() == "written while the export ran"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


@pytest.mark.parametrize("out", ["", "   ", "~nosuchuser_accel/x", "x" * 300])
def test_unusable_out_paths(run_cli, tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    line = one_line(*run_cli("export", "--design", "tiny", "--no-synth", "--out", out))
    assert "--out" in line
    assert list(tmp_path.iterdir()) == []
