"""The ``accel-dse`` command line.

Each subcommand lives in its own module of this package, listed in :data:`COMMANDS`; a module
exposes ``register(subparsers)`` that adds its parser and sets ``func(args) -> int``.
User errors (:class:`AccelDseError`) become one line on stderr and their exit code (2 for
usage/config errors); ``--debug`` (anywhere on the line) shows the traceback too and keeps the
exit status (a script that adds ``--debug`` sees the same code). With
``--json`` an error, a usage error too, is one JSON object on stderr instead,
``{"error": MESSAGE, "kind": KIND}``, with the same exit code (:func:`error_kind`). The line has
its control characters escaped and is cut to :data:`ERROR_LIMIT` characters. The same boundary turns what the
user's environment or input causes outside accel-dse's own checks into one line and exit 2: an
``OSError`` (disk full, permission denied, name too long, ...), a ``RecursionError`` (input
nested too deeply), a ``SystemExit`` raised by a user's module while the command runs, and a
failure of the study storage's database layer (a read-only or immutable SQLite file, a full
disk, a lock: :func:`accel_dse.storage_failure.storage_failure_text`, naming the storage).
A module of an optional extra that is not installed (``cocotb`` of ``[sim]``, ...) is one line
naming the extra, exit 2. Ctrl-C, SIGTERM and SIGHUP end it within moments with exit 130, whatever
runs, its half-written outputs removed and its child processes stopped (:mod:`accel_dse.cli._signals`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from accel_dse import __version__
from accel_dse.cli._signals import stop_on_signals
from accel_dse.storage_failure import storage_failure_text
from accel_spec.errors import AccelDseError
from accel_spec.text import shown

__all__ = ["main", "build_parser", "COMMANDS", "error_kind"]

#: Top-level modules of the optional extras -> the extra that installs them (see pyproject.toml).
EXTRAS = {
    "cocotb": "sim", "cocotb_tools": "sim", "find_libpython": "sim", "matplotlib": "report", "psycopg": "postgres",
}

#: Longest error line printed (longer ones are cut, ending in ``...``).
ERROR_LIMIT = 2000
#: Most error lines printed for one failure in text mode (then ``... and N more``; ``--json`` gives all).
ERROR_LINES = 20

#: Subcommand modules of ``accel_dse.cli``, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = (
    "design", "workloads", "evaluate", "system", "sweep", "simulate", "rtl", "export", "report", "verify",
)


class _UsageError(Exception):
    """A command line argparse refused (its message, and the (sub)parser that refused it)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors reach :func:`main` (to be shown as text or JSON), not ``sys.exit``."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def _pop_flags(argv: Sequence[str]) -> tuple[list[str], bool, bool]:
    """``argv`` without ``--debug`` (anywhere before a ``--``), whether it was there, whether ``--json`` is."""
    args = list(argv)
    end = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:end]
    kept = [a for a in args[:end] if a != "--debug"] + args[end:]
    return kept, debug, "--json" in args[:end]


def error_kind(exc: BaseException) -> str:
    """The ``kind`` of a ``--json`` error: ``config``, ``storage``, ... (the error class), ``usage``, ``os``, ..."""
    if isinstance(exc, _UsageError):
        return "usage"
    if isinstance(exc, AccelDseError):
        name = type(exc).__name__.removesuffix("Errors").removesuffix("Error")  # ConfigErrors: several of a kind
        return "".join(f"-{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name)) or "error"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, RecursionError):
        return "input"
    if isinstance(exc, SystemExit):
        return "user-module"
    return "os"


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = _Parser(
        prog="accel-dse",
        description="Design-space exploration for TPU-style systolic-array accelerators: "
        "generate RTL, verify it against JAX, model it, search it.",
    )
    parser.add_argument("--version", action="version", version=f"accel-dse {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show tracebacks of errors (accepted anywhere on the command line)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"accel_dse.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    argv, debug, as_json = _pop_flags(sys.argv[1:] if argv is None else argv)
    parser = build_parser()

    def fail(exc: BaseException, message: str, code: int) -> int:
        if debug:
            _traceback(exc)
        return _fail(message, code, error_kind(exc) if as_json else None)

    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        if not as_json:
            exc.parser.print_usage(sys.stderr)
            print(f"{exc.parser.prog}: error: {exc}", file=sys.stderr)
            return 2
        return _fail(f"{exc.parser.prog}: {exc}", 2, "usage")
    args.debug = debug
    try:
        stopped = json.dumps({"error": "interrupted", "kind": "interrupted"}) if as_json else "accel-dse: interrupted"
        with stop_on_signals(stopped):
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a full disk or closed pipe is reported here, not at exit
            return code
    except AccelDseError as exc:
        lines = getattr(exc, "messages", None)
        if lines and not as_json:  # several problems found in one pass: one error line each
            if debug:
                _traceback(exc)
            for line in lines[:ERROR_LINES]:
                _fail(line, exc.exit_code)
            if len(lines) > ERROR_LINES:
                _fail(f"... and {len(lines) - ERROR_LINES:,} more", exc.exit_code)
            return exc.exit_code
        return fail(exc, "; ".join(lines) if lines else str(exc), exc.exit_code)
    except KeyboardInterrupt as exc:
        if debug:
            _traceback(exc)
        if as_json:
            return _fail("interrupted", 130, error_kind(exc))
        print("accel-dse: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _drop_stdout()
        return 0
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        if debug:
            _traceback(exc)
        return _fail(f"accel-dse {args.command} needs {exc.name!r}, from the [{extra}] extra: "
                     f"pip install 'accel-dse[{extra}]' (scripts/setup.sh installs every extra)", 2,
                     "missing-extra" if as_json else None)
    except OSError as exc:
        if not debug:
            _drop_stdout()
        storage = getattr(args, "storage", None)
        if isinstance(storage, str) and exc.filename and str(exc.filename) in storage and not debug:
            return _fail(storage_failure_text(exc, storage) or os_error_text(exc), 2, "storage" if as_json else None)
        return fail(exc, os_error_text(exc), 2)
    except RecursionError as exc:
        return fail(exc, "input nested too deeply (Python's recursion limit); flatten it", 2)
    except SystemExit as exc:  # accel-dse never exits from inside a command: a user's module did
        return fail(exc, f"a user module raised SystemExit({exc.code!r}) while {args.command} ran "
                    "(a workload module must not call sys.exit or exit when imported)", 2)
    except Exception as exc:
        text = storage_failure_text(exc, getattr(args, "storage", None))
        if text is None or debug:
            raise
        return _fail(text, 2, "storage" if as_json else None)


def os_error_text(exc: OSError) -> str:
    """One line for an ``OSError``: what failed, on which path, why (``[Errno 28] ...`` never shown)."""
    reason = exc.strerror or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    where = f" ({' -> '.join(repr(p) for p in paths)})" if paths else ""
    return f"{reason[:1].lower()}{reason[1:]}{where}"


def _fail(message: str, code: int, kind: str | None = None) -> int:
    """Report an error on stderr (one line, or with ``kind`` one JSON object) and return ``code``."""
    line = shown(" ".join(message.split("\n")), ERROR_LIMIT)  # text from a file may hold escapes and be huge
    text = f"accel-dse: error: {line}" if kind is None else json.dumps({"error": line, "kind": kind})
    try:
        print(text, file=sys.stderr)
    except OSError:
        pass
    return code


def _traceback(exc: BaseException) -> None:
    """``--debug``: the error's traceback on stderr (the one-line message and exit status follow as without it)."""
    with contextlib.suppress(OSError):
        traceback.print_exception(exc, file=sys.stderr)
        sys.stderr.flush()


def _drop_stdout() -> None:
    """Point stdout at /dev/null when it cannot be written (full disk, closed pipe): no second error at exit."""
    try:
        sys.stdout.flush()
    except OSError:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
