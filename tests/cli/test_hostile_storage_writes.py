"""A storage that opens but refuses writes (an immutable or read-only file, a full disk, a lock) is
one line naming the storage and the cause, exit 2, under every command that writes to it."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess

import optuna
import pytest
from hostile_testlib import one_line, snapshot
from report_testlib import make_study

from accel_dse.storage_failure import storage_failure_text


def _freeze(path) -> str:
    """Make ``path`` unwritable: immutable (``chattr +i``) as root, else read-only; how it was done."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        return "read-only"
    if shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: no way to make a file unwritable for root")
    subprocess.run(["chattr", "+i", str(path)], check=True)
    return "immutable"


def _thaw(path) -> None:
    if os.geteuid() == 0 and shutil.which("chattr"):
        subprocess.run(["chattr", "-i", str(path)], check=False)
    path.chmod(0o644)


def _study_files(folder):
    """The snapshot of ``folder`` without SQLite's ``-wal`` / ``-shm`` side files (they stay while this
    process holds the engine, and go when a command's process ends)."""
    return {k: v for k, v in snapshot(folder).items() if not k.endswith(("-wal", "-shm"))}


@pytest.fixture
def frozen(tmp_path):
    """A SQLite and a journal study of 3 trials, each file unwritable while the test runs."""
    urls = {"sqlite": f"sqlite:///{tmp_path / 'study.db'}", "journal": f"journal:{tmp_path / 'study.journal'}"}
    for url in urls.values():
        storage = make_study(url, trials=3).study._storage
        storage = getattr(storage, "_backend", storage)
        if hasattr(storage, "engine"):
            storage.engine.dispose()
    files = [tmp_path / "study.db", tmp_path / "study.journal"]
    for path in files:
        _freeze(path)
    yield tmp_path, urls
    for path in files:
        _thaw(path)


@pytest.mark.parametrize("kind, cause", [("sqlite", "attempt to write a readonly database"),
                                         ("journal", "")])
def test_sweep_into_an_unwritable_study(run_cli, frozen, kind, cause):
    study = "new"
    folder, urls = frozen
    before = snapshot(folder)
    line = one_line(*run_cli("sweep", "--storage", urls[kind], "--study", study, "--space", "edge-int8",
                             "--trials", "2", "--quiet"))
    assert line.startswith(f"storage {urls[kind]!r} failed: {cause}"), line
    code, out, err = run_cli("sweep", "--storage", urls[kind], "--study", study, "--space", "edge-int8",
                             "--trials", "2", "--quiet", "--json")
    assert (code, out) == (2, "")
    assert json.loads(err)["kind"] == "storage"
    assert _study_files(folder) == before


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_reading_an_unwritable_study_succeeds(run_cli, frozen, tmp_path_factory, kind):
    folder, urls = frozen
    before = snapshot(folder)
    out = tmp_path_factory.mktemp("out")
    code, _, err = run_cli("report", "--storage", urls[kind], "--study", "s", "--out", str(out / "r"))
    assert code == 0, err
    code, _, err = run_cli("export", "--storage", urls[kind], "--study", "s", "--trial", "best", "--no-synth",
                           "--out", str(out / "e"))
    assert code == 0, err
    assert snapshot(folder) == before


@pytest.mark.parametrize("kind, cause", [
    ("sqlite", "attempt to write a readonly database"),
    ("journal", "operation not permitted" if os.geteuid() == 0 else "permission denied"),  # immutable / read-only
])
def test_verify_refuses_an_immutable_study_before_it_simulates(run_cli, frozen, monkeypatch, kind, cause):
    from accel_dse.verify import _run

    def simulated(*args, **kwargs):
        raise AssertionError("a design was simulated although its result could not be recorded")

    monkeypatch.setattr(_run, "_verify_one", simulated)
    folder, urls = frozen
    before = snapshot(folder)
    line = one_line(*run_cli("verify", "--storage", urls[kind], "--study", "s", "--top", "1",
                             "--simulator", "icarus"))
    assert line.startswith("cannot record RTL results in ") and "it takes no write" in line, line
    assert cause in line, line
    assert _study_files(folder) == before


def test_a_full_disk_or_a_lock_under_optuna_is_named_by_its_cause():
    import sqlalchemy.exc

    def wrapped(message: str) -> BaseException:
        try:
            try:
                try:
                    raise sqlite3.OperationalError(message)
                except sqlite3.OperationalError as inner:
                    raise sqlalchemy.exc.OperationalError("COMMIT", {}, inner) from inner
            except sqlalchemy.exc.OperationalError as exc:
                raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from exc
        except optuna.exceptions.StorageInternalError as exc:
            return exc

    url = "postgresql://me:pw@db.example/x"
    assert (storage_failure_text(wrapped("database or disk is full"), "sqlite:///s.db")
            == "storage 'sqlite:///s.db' failed: database or disk is full")
    text = storage_failure_text(wrapped(f"database is locked ({url})"), url)
    assert text == "storage 'postgresql://me:***@db.example/x' failed: database is locked (postgresql://me:***@db.example/x)"
    assert storage_failure_text(ValueError("not storage"), url) is None
