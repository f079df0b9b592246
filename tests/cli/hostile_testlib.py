"""Helpers of the hostile-input tests: directory snapshots and the one-line error contract."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from tests.cli_testlib import ERROR_PREFIX, one_line_error

__all__ = ["snapshot", "one_line", "ERROR_PREFIX"]


def snapshot(*roots: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under ``roots`` (without following links): ``path -> (kind, mode, content digest)``.

    Two snapshots are equal when nothing under the roots was created, deleted, renamed, changed
    in content or in permissions.
    """
    out: dict[str, tuple[str, int, str]] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in [*dirnames, *filenames]:
                path = Path(dirpath) / name
                info = path.lstat()
                if stat.S_ISREG(info.st_mode):
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                    kind = "file"
                elif stat.S_ISLNK(info.st_mode):
                    digest, kind = os.readlink(path), "link"
                else:
                    digest, kind = "", "dir" if stat.S_ISDIR(info.st_mode) else "other"
                out[str(path)] = (kind, stat.S_IMODE(info.st_mode), digest)
    return out


def one_line(code: int, out: str, err: str, *, status: int = 2) -> str:
    """Check the bad-input contract (:func:`tests.cli_testlib.one_line_error`); return the line without its prefix."""
    return one_line_error(code, out, err, status=status)[len(ERROR_PREFIX):]


#: Runs each ``argv`` of the JSON list in ``sys.argv[1]`` through the CLI in this process; prints the results.
_PRLIMIT_DRIVER = """import contextlib, io, json, sys
from accel_dse.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


def cli_under_prlimit(runs: list[list[str]], cwd: Path, memory: int = 2 * 10**9) -> list[tuple[int, str, str]]:
    """``(code, stdout, stderr)`` of each CLI ``argv`` of ``runs``, all in one child under ``prlimit --as=memory``.

    One interpreter for all (in-process CLI calls): a refusal past a limit must come before the
    work, which the address-space bound checks without a start-up per case.
    """
    import json
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = str(repo) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(["prlimit", f"--as={memory}", sys.executable, "-c", _PRLIMIT_DRIVER, json.dumps(runs)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [tuple(r) for r in json.loads(proc.stdout.strip().splitlines()[-1])]
