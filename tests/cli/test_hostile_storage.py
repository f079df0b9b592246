"""Storages: read-only commands never write, foreign and special files are refused untouched, secrets masked."""

from __future__ import annotations

import os
import subprocess
import sys

import optuna
import pytest
from hostile_testlib import one_line, snapshot
from report_testlib import make_study

SECRET = "s3kr1t-pw"


@pytest.fixture(scope="module")
def plain_optuna(tmp_path_factory):
    """A SQLite study written by plain Optuna (rollback journal, attributes of another tool)."""
    folder = tmp_path_factory.mktemp("plain")
    url = f"sqlite:///{folder / 'plain.db'}"
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(storage=url, study_name="s")
    study.set_user_attr("accel_dse.objectives", 5)  # another tool's idea of this attribute
    study.set_user_attr("accel_dse.workloads", {"not": "a list"})
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    return folder, url


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A SQLite (WAL) and a journal study written by accel-dse sweep."""
    folder = tmp_path_factory.mktemp("swept")
    urls = {"sqlite": f"sqlite:///{folder / 'study.db'}", "journal": f"journal:{folder / 'study.journal'}"}
    for url in urls.values():
        storage = make_study(url, trials=6).study._storage
        storage = getattr(storage, "_backend", storage)
        if hasattr(storage, "engine"):  # close as the sweep's process does when it ends: no -wal/-shm left
            storage.engine.dispose()
    assert sorted(p.name for p in folder.iterdir()) == ["study.db", "study.journal"]
    return folder, urls


def test_report_and_export_leave_a_plain_optuna_study_byte_identical(plain_optuna, run_cli, tmp_path):
    folder, url = plain_optuna
    before = snapshot(folder)
    code, _, err = run_cli("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "r"))
    assert code == 0, err
    line = one_line(*run_cli("export", "--storage", url, "--study", "s", "--trial", "0", "--out", str(tmp_path / "e")))
    assert "has no 'config' user attribute" in line
    assert snapshot(folder) == before  # no WAL switch, no -wal/-shm files, no tables added


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_reading_a_swept_study_writes_nothing_beside_it(swept, run_cli, tmp_path, kind):
    folder, urls = swept
    before = snapshot(folder)
    code, _, err = run_cli("report", "--storage", urls[kind], "--study", "s", "--out", str(tmp_path / "r"))
    assert code == 0, err
    code, _, err = run_cli("export", "--storage", urls[kind], "--study", "s", "--trial", "best", "--no-synth",
                           "--out", str(tmp_path / "e"))
    assert code == 0, err
    line = one_line(*run_cli("report", "--storage", urls[kind], "--study", "nope", "--out", str(tmp_path / "x")))
    assert "no study 'nope'" in line
    assert snapshot(folder) == before


def test_verify_refuses_an_unknown_workload_before_recording(swept, run_cli):
    folder, urls = swept
    before = snapshot(folder)
    line = one_line(*run_cli("verify", "--storage", urls["sqlite"], "--study", "s", "--top", "1",
                             "--workload", "nosuch", "--simulator", "icarus"))
    assert "unknown workload 'nosuch'" in line
    assert snapshot(folder) == before
    attrs = optuna.load_study(study_name="s", storage=urls["sqlite"]).user_attrs
    assert not [k for k in attrs if k.startswith("accel_dse.verify.")]


@pytest.mark.parametrize("content", [b'{"a": 1}\n', b"hello", b'{"op_code": 0}', b"\x00" * 64, b'{"op_code": 0}\n{'])
def test_journal_on_a_file_that_is_not_a_journal(run_cli, tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    before = snapshot(tmp_path)
    line = one_line(*run_cli("sweep", "--storage", f"journal:{path}", "--trials", "1", "--quiet"))
    assert "is not an Optuna journal file" in line
    line = one_line(*run_cli("report", "--storage", f"journal:{path}", "--study", "s", "--out", str(tmp_path / "r")))
    assert "is not an Optuna journal file" in line
    assert snapshot(tmp_path) == before


def test_a_journal_with_a_torn_last_line_still_opens(swept, tmp_path, run_cli):
    folder, urls = swept
    torn = tmp_path / "torn.journal"
    torn.write_bytes((folder / "study.journal").read_bytes() + b'{"op_code": 5, "wor')
    code, _, err = run_cli("report", "--storage", f"journal:{torn}", "--study", "s", "--out", str(tmp_path / "r"))
    assert code == 0, err


@pytest.mark.parametrize("command", ["sweep", "report"])
def test_special_files_are_refused_before_they_are_read(tmp_path, cli_env, command):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    extra = ["--trials", "1", "--quiet"] if command == "sweep" else ["--study", "s", "--out", str(tmp_path / "r")]
    for url in (f"journal:{fifo}", f"sqlite:///{fifo}", "journal:/dev/full", "journal:/dev/zero", "sqlite:////dev/null"):
        proc = subprocess.run([sys.executable, "-m", "accel_dse", command, "--storage", url, *extra],
                              capture_output=True, text=True, env=cli_env, timeout=120, cwd=tmp_path)
        line = one_line(proc.returncode, proc.stdout, proc.stderr)
        assert "is not a regular file" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


URLS = [
    f"postgresql://me:{SECRET}@db.example:notaport/x",  # malformed port
    f"postgresql://me@127.0.0.1:1/x?password={SECRET}",  # query-string password, server down
    f"postgresql://me:{SECRET[:4]}@{SECRET[4:]}@127.0.0.1:1/x",  # a raw '@' in the password
    f"postgresql://me:{SECRET}@127.0.0.1:1/x",  # server down
    f"postgresql+nosuchdriver://me:{SECRET}@127.0.0.1/x",  # unknown dialect
    f"mysql://me:{SECRET}@127.0.0.1:1/x?connect_timeout=1&passwd={SECRET}",
]


@pytest.mark.parametrize("url", URLS)
def test_no_command_prints_a_password(run_cli, tmp_path, url):
    commands = [
        ("sweep", "--storage", url, "--trials", "1", "--quiet"),
        ("report", "--storage", url, "--study", "s", "--out", str(tmp_path / "r")),
        ("export", "--storage", url, "--study", "s", "--trial", "best", "--out", str(tmp_path / "e")),
        ("verify", "--storage", url, "--study", "s", "--top", "1", "--simulator", "icarus"),
    ]
    for argv in commands:
        code, out, err = run_cli(*argv)
        line = one_line(code, out, err)
        assert SECRET not in out + err and SECRET[:4] not in line and SECRET[4:] not in line, (argv, line)
        assert "***" in line, line
    assert list(tmp_path.iterdir()) == []


def test_mask_url():
    from accel_dse.search import mask_url, redact

    assert mask_url("postgresql://me:pw@host:5432/db") == "postgresql://me:***@host:5432/db"
    assert mask_url("postgresql://me@host/db?sslmode=require&password=pw") == \
        "postgresql://me@host/db?sslmode=require&password=***"
    assert mask_url("postgresql://me:p@w@host/db") == "postgresql://me:***@host/db"
    assert mask_url("postgresql://me:p%40w@host/db") == "postgresql://me:***@host/db"
    assert mask_url("sqlite:///runs/a@b/study.db") == "sqlite:///runs/a@b/study.db"
    assert redact("could not parse 'postgresql://me:p%40w@h/db' (p@w)", "postgresql://me:p%40w@h/db") == \
        "could not parse 'postgresql://me:***@h/db' (***)"


def test_verify_keeps_the_journal_mode_of_a_plain_optuna_database(plain_optuna, tmp_path):
    from accel_dse.search import open_storage, parse_storage

    folder, _ = plain_optuna
    db = tmp_path / "copy.db"
    db.write_bytes((folder / "plain.db").read_bytes())
    header = db.read_bytes()[18:20]
    storage = open_storage(parse_storage(f"sqlite:///{db}"), heartbeat_interval=None)  # writable, as verify opens
    optuna.load_study(study_name="s", storage=storage).set_user_attr("accel_dse.verify.0", {"passed": True})
    storage.engine.dispose()
    assert db.read_bytes()[18:20] == header == b"\x01\x01"  # still a rollback journal, not WAL
    new = tmp_path / "new.db"
    open_storage(parse_storage(f"sqlite:///{new}"), heartbeat_interval=None).engine.dispose()
    assert new.read_bytes()[18:20] == b"\x02\x02"  # a database accel-dse creates is WAL


def test_a_study_in_a_directory_without_write_permission_is_reported(swept, run_cli, tmp_path, monkeypatch):
    # Tests run as root, for whom chmod does not bite: deny write access to the study's directory the way
    # os.access answers an ordinary user, and check the report reads it as immutable, writing nothing.
    import accel_dse.search.study.storage as storage_module

    folder, _ = swept
    place = tmp_path / "ro"
    place.mkdir()
    (place / "study.db").write_bytes((folder / "study.db").read_bytes())
    (place / "study.db-wal").write_bytes(b"")  # as if a writer were open: plain mode=ro would need -shm
    spec = storage_module.parse_storage(f"sqlite:///{place / 'study.db'}")
    assert storage_module._sqlite_url(spec, True).endswith("?mode=ro&uri=true")
    real = os.access
    monkeypatch.setattr(storage_module.os, "access",
                        lambda path, mode: False if str(path) == str(place) and mode & os.W_OK else real(path, mode))
    assert storage_module._sqlite_url(spec, True).endswith("?immutable=1&uri=true")
    before = snapshot(place)
    code, _, err = run_cli("report", "--storage", spec.url, "--study", "s", "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert snapshot(place) == before
