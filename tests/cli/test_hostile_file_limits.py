"""Workloads that are not builtins are held to the same limits, before the work: files and traced functions.

A builtin's options are checked before it is traced (``test_hostile_limits.py``). A workload file
(SCALE-Sim CSV, Timeloop YAML, ONNX, StableHLO) or a user's JAX function has no options: its ops
are checked as they are read or traced, before a reference run, a simulation or a compile
allocates anything for them. Before, each case below was read as a legal workload (``workloads
show`` printed it) and left to the commands after it. All cases run in one child under
``prlimit --as`` (2 GB), one in-process CLI call each.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MEMORY = 2 * 10**9
ELEMENTS_RULE = "beyond the 4,294,967,296 (2**32) a tensor may have in the accelerator's 32-bit DRAM address space"

#: Runs each ``argv`` of the JSON list in ``sys.argv[1]`` through the CLI in this process; prints the results.
DRIVER = """import contextlib, io, json, sys
from accel_dse.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""

BIG_FUNCTION = """import jax.numpy as jnp


def f():
    x = jnp.ones((2**20, 2**13), jnp.int8)
    return x @ jnp.ones((2**13, 4), jnp.int8)
"""

BIG_MLIR = """module @jit_f {
  func.func public @main(%arg0: tensor<1048576x8192xi8>, %arg1: tensor<8192x4xi8>) -> (tensor<1048576x4xi32>) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
        : (tensor<1048576x8192xi8>, tensor<8192x4xi8>) -> tensor<1048576x4xi32>
    return %0 : tensor<1048576x4xi32>
  }
}
"""

BIG_YAML = """problem:
  shape:
    name: CNN-Layer
    dimensions: [C, M, R, S, N, P, Q]
  instance: {C: 64, M: 64, R: 1, S: 1, N: 1, P: 65536, Q: 4096}
"""


def _files(folder: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "workloads"))
    try:
        from onnx_graphs import resnet18
    finally:
        sys.path.pop(0)
    resnet18(folder / "resnet18.onnx")
    (folder / "big.csv").write_text("Layer, M, N, K,\nbig, 1048576, 1, 8192,\n")
    (folder / "many.csv").write_text("Layer, M, N, K,\n" + "".join(f"l{i}, 8, 8, 8,\n" for i in range(300_000)))
    (folder / "big.yaml").write_text(BIG_YAML)
    (folder / "big.mlir").write_text(BIG_MLIR)
    (folder / "bigfn.py").write_text(BIG_FUNCTION)


#: ``(workload, what the one line says)``: each is refused by ``workloads show`` and ``evaluate``.
CASES = [
    ("big.csv", "big.csv: gemm 'big' A = batch * m * k = 8,589,934,592 elements, " + ELEMENTS_RULE),
    ("many.csv", "many.csv holds 300,000 layer rows, beyond the 262,144 (2**18) a workload may have"),
    ("big.yaml", "big.yaml: conv2d 'CNN-Layer' input = n * h * w * c_in = 17,179,869,184 elements, " + ELEMENTS_RULE),
    ("big.mlir", "big.mlir: gemm"),
    ("resnet18.onnx:N=6000", "resnet18.onnx: conv2d"),
    ("bigfn:f", "workload 'bigfn:f': a value of broadcast_in_dim has shape 1,048,576 x 8,192 = 8,589,934,592 "
                "elements, " + ELEMENTS_RULE),
]


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit")
def test_files_and_functions_past_a_limit_are_refused_before_the_work(tmp_path):
    _files(tmp_path)
    runs = []
    for spec, _ in CASES:
        runs += [["workloads", "show", spec], ["evaluate", "--design", "edge", "--workload", spec]]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(["prlimit", f"--as={MEMORY}", sys.executable, "-c", DRIVER, json.dumps(runs)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for argv, (code, out, err) in zip(runs, results, strict=True):
        expected = dict(CASES)[argv[-1]]
        lines = err.strip().splitlines()
        assert (code, out, len(lines)) == (2, "", 1), (argv, code, err[-2000:])
        assert lines[0].startswith("accel-dse: error: " + expected), (argv, lines[0])
        assert "elements" in lines[0] or "rows" in lines[0], (argv, lines[0])
