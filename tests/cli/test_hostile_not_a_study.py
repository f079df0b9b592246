"""Third hostile round: a file that is not a study is never changed; an output never replaces an input or,
without ``--force``, any existing file."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from hostile_testlib import one_line, snapshot

PRESETS = Path(__file__).resolve().parents[2] / "accel_dse" / "presets"


def _foreign(path: Path, *, wal: bool = False) -> None:
    """Another application's SQLite database (one table of its own)."""
    connection = sqlite3.connect(path)
    if wal:
        connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    connection.execute("INSERT INTO notes (text) VALUES ('keep me')")
    connection.commit()
    connection.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


FILES = {
    "foreign": lambda p: _foreign(p),
    "foreign-wal": lambda p: _foreign(p, wal=True),
    "empty": lambda p: p.write_bytes(b""),
    "text": lambda p: p.write_text("not a database\n"),
}

READERS = {
    "verify": ("verify", "--full-scale", "--no-synth", "--top", "1", "--simulator", "icarus"),
    "report": ("report", "--out", "{tmp}/report"),
    "export": ("export", "--trial", "best", "--no-synth", "--out", "{tmp}/design"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("kind", sorted(FILES))
def test_a_file_that_is_not_a_study_is_refused_byte_identical(run_cli, tmp_path, reader, kind):
    folder = tmp_path / "data"
    folder.mkdir()
    db = folder / "app.db"
    FILES[kind](db)
    digest, before = _digest(db), snapshot(folder)
    argv = [a.format(tmp=tmp_path) for a in READERS[reader]]
    line = one_line(*run_cli(*argv, "--storage", f"sqlite:///{db}", "--study", "base"))
    assert str(db) in line, line
    expected = {"foreign": "is not an Optuna study database", "foreign-wal": "is not an Optuna study database",
                "empty": "is an empty file, not an Optuna study database", "text": "is not a SQLite database"}[kind]
    assert expected in line, line
    assert _digest(db) == digest
    assert snapshot(folder) == before  # no -wal, -shm or -journal file beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no report or design folder either


def test_verify_records_into_an_existing_study_without_creating_tables(run_cli, tmp_path):
    """The refusal is for files without Optuna's tables: a plain Optuna study is still opened by verify."""
    import optuna

    from accel_dse.search import open_storage, parse_storage

    db = tmp_path / "plain.db"
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    optuna.create_study(storage=f"sqlite:///{db}", study_name="s")
    storage = open_storage(parse_storage(f"sqlite:///{db}"), heartbeat_interval=None, create=False)
    assert optuna.get_all_study_names(storage) == ["s"]
    storage.engine.dispose()


def test_rtl_verilog_never_writes_onto_its_design_file(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    design = tmp_path / "D.toml"
    design.write_bytes((PRESETS / "tiny.toml").read_bytes())
    (tmp_path / "link.toml").hardlink_to(design)
    before = snapshot(tmp_path)
    for target in ("D.toml", str(design), "./D.toml", "link.toml"):
        for force in ((), ("--force",)):
            line = one_line(*run_cli("rtl", "verilog", "D.toml", "-o", target, *force))
            assert f"-o {target!r} is the input file 'D.toml'" in line, line
    assert snapshot(tmp_path) == before


def test_rtl_verilog_replaces_an_existing_file_only_with_force(run_cli, tmp_path):
    out = tmp_path / "out.v"
    out.write_text("keep\n")
    line = one_line(*run_cli("rtl", "verilog", "tiny", "-o", str(out)))
    assert f"-o {str(out)!r} exists: give --force to replace it" == line
    assert out.read_text() == "keep\n"
    code, _, err = run_cli("rtl", "verilog", "tiny", "-o", str(out), "--force")
    assert code == 0, err
    assert "module " in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.v"]  # no temporary file left


def test_system_figure_replaces_an_existing_file_only_with_force(run_cli, tmp_path):
    figure = tmp_path / "f.png"
    figure.write_bytes(b"mine")
    small = ("system", "evaluate", "--system", "tpu-v5e-pod", "--dims", "2,2", "--model", "qwen3_moe_30b:layers=4",
             "--seq", "256", "--batch", "16")
    line = one_line(*run_cli(*small, "--figure", str(figure)))
    assert f"--figure {str(figure)!r} exists: give --force to replace it" == line
    assert figure.read_bytes() == b"mine"
    pytest.importorskip("matplotlib")
    code, _, err = run_cli(*small, "--figure", str(figure), "--force")
    assert code == 0, err
    assert figure.read_bytes().startswith(b"\x89PNG")


def test_grid_table_replaces_an_existing_file_only_with_force(run_cli, tmp_path):
    table = tmp_path / "grid.npz"
    table.write_bytes(b"mine")
    line = one_line(*run_cli("sweep", "--sampler", "grid", "--storage", "memory:", "--grid-table", str(table),
                             "--quiet"))
    assert f"--grid-table {str(table)!r} exists: give --force to replace it" == line
    assert table.read_bytes() == b"mine"
