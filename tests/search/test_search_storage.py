"""Storage URLs, study creation/compatibility, budget counting and dead-worker cleanup."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState
from search_testlib import make_space

from accel_dse.search import budget_used, fail_dead_trials, open_storage, open_study, parse_storage
from accel_dse.search.study.owner import process_alive, worker_identity
from accel_spec.errors import SearchError, StorageError


def test_parse_storage_kinds(tmp_path):
    s = parse_storage(f"sqlite:///{tmp_path}/a.db")
    assert s.kind == "sqlite" and s.path == tmp_path / "a.db" and s.has_heartbeat
    j = parse_storage(f"journal:{tmp_path}/j.log")
    assert j.kind == "journal" and j.path == tmp_path / "j.log" and not j.has_heartbeat
    assert parse_storage(f"journal://{tmp_path}/j.log").path == tmp_path / "j.log"
    p = parse_storage("postgres://me:secret@db.example:5432/dse")
    assert p.kind == "rdb" and p.url.startswith("postgresql://") and "secret" not in p.display
    assert parse_storage("memory:").kind == "memory" and not parse_storage("memory:").multi_process


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "must not be empty"),
        ("sqlite:/x.db", "is malformed"),
        ("study.db", "is malformed"),
        ("oracle2://u@h/db", "unknown database kind 'oracle2'"),
        ("postgresql://u@localhost", "names no database"),
        ("journal:", "needs a file path"),
    ],
)
def test_malformed_urls(url, message):
    with pytest.raises(StorageError, match=message):
        parse_storage(url)


@pytest.mark.parametrize("scheme", ["sqlite:///", "journal:"])
def test_missing_directory_is_refused_and_nothing_created(tmp_path, scheme):
    target = tmp_path / "typo" / "deeper" / "study.db"
    with pytest.raises(StorageError, match=r"directory .*typo/deeper' of storage .* does not exist"):
        open_storage(parse_storage(f"{scheme}{target}"))
    assert list(tmp_path.iterdir()) == []


def test_not_a_database_file(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_text("hello, not sqlite")
    with pytest.raises(StorageError, match="is not a SQLite database"):
        open_storage(parse_storage(f"sqlite:///{junk}"))
    with pytest.raises(StorageError, match="is not an Optuna journal file"):
        open_storage(parse_storage(f"journal:{junk}"))
    assert junk.read_text() == "hello, not sqlite"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_server_is_one_line():
    url = f"postgresql://nobody:pw@127.0.0.1:{_free_port()}/dse"
    start = time.monotonic()
    with pytest.raises(StorageError, match=r"cannot open storage 'postgresql://nobody:\*\*\*@127.0.0.1") as info:
        open_storage(parse_storage(url))
    assert "\n" not in str(info.value)
    assert time.monotonic() - start < 30


def test_a_worker_joining_a_study_its_creator_has_not_marked_yet_waits_for_the_mark(tmp_path):
    """Optuna creates a study and its attributes in separate writes: a second sweep can see it in between."""
    import threading

    url = f"sqlite:///{tmp_path}/s.db"
    space = make_space()
    marked = open_study(open_storage(parse_storage(f"sqlite:///{tmp_path}/ref.db")), "x", space, where="test")
    bare = optuna.create_study(storage=open_storage(parse_storage(url)), study_name="x")  # created, not marked

    def creator_marks() -> None:
        time.sleep(0.5)
        # as open_study marks a study: the objectives last, so a reader that sees them sees the rest
        attrs = sorted(marked.user_attrs.items(), key=lambda item: item[0] == "accel_dse.objectives")
        for key, value in attrs:
            bare.set_user_attr(key, value)

    creator = threading.Thread(target=creator_marks)
    creator.start()
    try:
        joined = open_study(open_storage(parse_storage(url)), "x", space, where="test", create=False)
    finally:
        creator.join()
    assert joined.user_attrs["accel_dse.objectives"] == ["edp"]


def test_study_compatibility(tmp_path):
    storage = open_storage(parse_storage(f"sqlite:///{tmp_path}/s.db"))
    space = make_space()
    study = open_study(storage, "x", space, where="test")
    assert study.user_attrs["accel_dse.objectives"] == ["edp"]
    study.add_trial(optuna.trial.create_trial(value=1.0))
    again = open_study(storage, "x", make_space(name="renamed"), where="test")
    assert len(again.trials) == 1
    with pytest.raises(SearchError, match=r"has objectives \['edp'\], not \['latency', 'area'\]"):
        open_study(storage, "x", make_space(objectives=["latency", "area"]), where="test")
    with pytest.raises(SearchError, match="made from another design space"):
        open_study(storage, "x", make_space(constraints=["area_mm2 <= 1"]), where="test")
    optuna.create_study(storage=storage, study_name="foreign")
    with pytest.raises(SearchError, match="was not made by accel-dse sweep"):
        open_study(storage, "foreign", space, where="test", setup_wait_s=0.3)
    with pytest.raises(SearchError, match="no study 'missing'"):
        open_study(storage, "missing", space, where="test", create=False)
    # Refusals left the study as it was.
    assert len(open_study(storage, "x", space, where="test").trials) == 1


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("kind", ["journal", "sqlite"])  # budget_used reads the trials / counts rows in SQL
def test_fail_dead_trials_fails_and_requeues_only_dead_local_workers(tmp_path, kind):
    url = f"journal:{tmp_path}/j.log" if kind == "journal" else f"sqlite:///{tmp_path}/s.db"
    storage = open_storage(parse_storage(url))
    space = make_space()
    study = open_study(storage, "x", space, where="test")
    me = worker_identity()
    dead = study.ask({"log2_rows": optuna.distributions.IntDistribution(1, 6)})
    dead.suggest_int("log2_rows", 1, 6)
    dead.set_user_attr("host", me["host"])
    dead.set_user_attr("pid", _dead_pid())
    alive = study.ask()
    alive.set_user_attr("host", me["host"])
    alive.set_user_attr("pid", me["pid"])
    alive.set_user_attr("pid_start", me["pid_start"])
    remote = study.ask()
    remote.set_user_attr("host", "some-other-machine")
    remote.set_user_attr("pid", 1)
    assert budget_used(study) == 3
    assert fail_dead_trials(study) == [dead.number]
    trials = study.get_trials()
    assert trials[dead.number].state == TrialState.FAIL
    assert trials[dead.number].user_attrs["status"] == "worker died"
    assert trials[alive.number].state == TrialState.RUNNING
    assert trials[remote.number].state == TrialState.RUNNING
    retry = [t for t in trials if t.state == TrialState.WAITING]
    assert len(retry) == 1 and retry[0].system_attrs["failed_trial"] == dead.number
    assert retry[0].params == trials[dead.number].params
    # The failure that is being retried is not counted twice against --trials.
    assert budget_used(study) == 2
    assert fail_dead_trials(study) == []
    # The retry runs and fails too: it is queued again, and the chain still counts once.
    again = study.ask()
    assert study.get_trials()[again.number].system_attrs["failed_trial"] == dead.number
    again.set_user_attr("host", me["host"])
    again.set_user_attr("pid", _dead_pid())
    assert budget_used(study) == 3  # dead (retried, not counted), alive, remote, the running retry
    assert fail_dead_trials(study) == [again.number]
    assert budget_used(study) == 2
    third = [t for t in study.get_trials() if t.state == TrialState.WAITING]
    assert len(third) == 1 and third[0].system_attrs["retry_history"] == [dead.number, again.number]


def test_process_alive():
    me = worker_identity()
    assert process_alive(me["pid"], me["pid_start"])
    assert not process_alive(me["pid"], "1")  # same pid, other start time: a reused pid
    assert not process_alive(_dead_pid())
    assert not process_alive(None)


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_a_queued_trial_taken_by_a_worker_killed_before_it_wrote_its_owner_is_failed(tmp_path, kind, monkeypatch):
    """The one moment a RUNNING trial has no owner: a retry just taken from the queue (one storage write)."""
    from accel_dse.search.study import owner

    url = f"journal:{tmp_path}/j.log" if kind == "journal" else f"sqlite:///{tmp_path}/s.db"
    storage = open_storage(parse_storage(url), heartbeat_interval=1, grace_period=1)
    study = open_study(storage, "x", make_space(), where="test")
    dead = owner.ask_owned(study, {"host": worker_identity()["host"], "pid": _dead_pid()})
    assert fail_dead_trials(study) == [dead.number]
    taken = owner._take_waiting(study)  # the worker is killed here, before ask_owned writes the owner
    trial = next(t for t in study.get_trials() if t._trial_id == taken)
    assert trial.state == TrialState.RUNNING and "host" not in trial.user_attrs and "status" not in trial.user_attrs
    assert fail_dead_trials(study) == []  # it may still be a live worker's: within the grace period
    monkeypatch.setattr(owner, "OWNERLESS_GRACE_S", 0)
    time.sleep(1.2)  # past the 1 s grace period of the heartbeat too
    assert fail_dead_trials(study) == [trial.number]
    assert study.get_trials()[trial.number].user_attrs["status"] == "worker died"
    assert not [t for t in study.get_trials() if t.state == TrialState.RUNNING]


def test_opening_a_storage_again_keeps_this_process_sqlite_locks(tmp_path):
    """Closing a descriptor of a database file drops every POSIX lock of the process on it: never open it by hand."""
    import sqlite3

    path = tmp_path / "locks.db"
    url = f"sqlite:///{path}"
    # An existing database in rollback-journal mode (kept so: only a fresh one is switched to WAL),
    # where a reader's SHARED lock is a lock on the database file itself.
    sqlite3.connect(path).execute("CREATE TABLE mine (x)").connection.close()
    open_storage(parse_storage(url))  # Optuna's tables
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM mine").fetchone()  # holds a SHARED lock until COMMIT
    open_storage(parse_storage(url))  # as `sweep --verify-top` does while the sweep's connections are open
    writer = subprocess.run(
        [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=0, "
         "isolation_level=None); c.execute('BEGIN EXCLUSIVE')", str(path)], capture_output=True, text=True)
    reader.execute("COMMIT")
    assert writer.returncode != 0 and "database is locked" in writer.stderr  # the reader still holds its lock
