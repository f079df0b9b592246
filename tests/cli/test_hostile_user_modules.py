"""User modules contained: whatever a workload module does while imported or traced (raise any
BaseException, end the process, print) is one line naming it and exit 2, or a clean success."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hostile_testlib import one_line

TRACEABLE = """
import jax, jax.numpy as jnp

def f(x):
    print("tracing f")
    return x @ x

f.example_args = (jax.ShapeDtypeStruct((8, 8), jnp.int8),)
"""


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    """A directory holding the user modules, as the current directory (where ``mod:function`` finds them)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("body, shown", [
    ("class Boom(BaseException):\n    pass\nraise Boom('bang')", "its module raised Boom: bang"),
    ("raise GeneratorExit('gone')", "its module raised GeneratorExit: gone"),
    ("raise GeneratorExit", "its module raised GeneratorExit"),
    ("import os\nos._exit(0)", "the process tracing it exited with status 0 without a result"),
    ("import os\nos._exit(9)", "the process tracing it exited with status 9 without a result"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "the process tracing it was killed by SIGKILL"),
    (TRACEABLE.replace("return x @ x", "raise GeneratorExit('in trace')"), "its module raised GeneratorExit: in trace"),
    (TRACEABLE.replace("return x @ x", "import os; os._exit(0)"), "exited with status 0 without a result"),
])
@pytest.mark.parametrize("command", [("workloads", "show"), ("evaluate", "--design", "tiny", "--workload")])
def test_a_module_that_raises_or_ends_the_process(run_cli, module_dir, body, shown, command):
    assert "hostile_user" not in sys.modules
    name = "hostile_user"  # imported only in the child: no module of that name is left in this process
    (module_dir / f"{name}.py").write_text(body + "\n")
    code, out, err = run_cli(*command, f"{name}:f")
    if "tracing f" in body:  # the module's own print goes to stderr, before the one error line
        err = err.removeprefix("tracing f\n")  # (os._exit may end the child before it is flushed)
    line = one_line(code, out, err)
    assert line.startswith(f"workload '{name}:f': "), line
    assert shown in line, line


def test_os_exit_is_not_success_in_a_separate_process(cli_env, module_dir):
    (module_dir / "quits.py").write_text("import os\nos._exit(0)\n")
    env = dict(cli_env, PYTHONPATH=cli_env["PYTHONPATH"])
    run = subprocess.run([sys.executable, "-m", "accel_dse", "workloads", "show", "--json", "quits:f"], env=env,
                         cwd=module_dir, capture_output=True, text=True, timeout=300, check=False)
    assert (run.returncode, run.stdout) == (2, "")
    error = json.loads(run.stderr)
    assert error["kind"] == "workload" and "quits:f" in error["error"] and "without a result" in error["error"]


def test_a_printing_module_leaves_json_parseable(cli_env, module_dir):
    (module_dir / "chatty.py").write_text('print("hello on import")\n' + TRACEABLE)
    run = subprocess.run([sys.executable, "-m", "accel_dse", "workloads", "show", "--json", "chatty:f"], env=cli_env,
                         cwd=module_dir, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["workload"] == "chatty:f" and [op["m"] for op in data["ops"]] == [8]
    assert "hello on import" in run.stderr and "tracing f" in run.stderr


def test_a_printing_module_in_process(run_cli, module_dir):
    (module_dir / "chatty2.py").write_text('print("hello on import")\n' + TRACEABLE)
    code, out, err = run_cli("workloads", "show", "--json", "chatty2:f")
    assert code == 0, err
    assert json.loads(out)["workload"] == "chatty2:f"


def test_a_fresh_interpreter_child_reports_the_same(module_dir):
    from accel_spec.errors import WorkloadError
    from workloads._user_child import trace_user

    (module_dir / "quits2.py").write_text("import os\nos._exit(3)\n")
    (module_dir / "fine.py").write_text(TRACEABLE)
    path = [str(module_dir), *sys.path]
    with pytest.raises(WorkloadError, match="exited with status 3 without a result"):
        trace_user("quits2:f", path=path)
    workload, params, flow = trace_user("fine:f", path=path)
    assert [(op.m, op.k, op.n) for op in workload.ops] == [(8, 8, 8)] and params == ()
    assert "fine" not in sys.modules and "quits2" not in sys.modules
