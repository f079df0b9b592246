"""A user's float JAX model on ``evaluate``: its SQNR is the quantised model's, with the spec's options."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from workloads import resolve
from workloads.accuracy import sqnr_source, workload_sqnr_db

MODULE = '''
import jax
import jax.numpy as jnp
import numpy as np

S = jax.ShapeDtypeStruct
rng = np.random.default_rng(0)
W1 = (rng.standard_normal((32, 64)) / 5.7 * np.exp(np.linspace(-3, 3, 64))).astype(np.float32)
INV = np.exp(-np.linspace(-3, 3, 64)).astype(np.float32)
W2 = (rng.standard_normal((64, 32)) / 8).astype(np.float32)

def mlp(x):
    """A float MLP with a folded per-channel scale."""
    return x + jax.nn.gelu((x @ W1) * INV) @ W2

mlp.example_args = (S((8, 32), jnp.float32),)

def integer(x, w):
    return jnp.matmul(x, w, preferred_element_type=jnp.int32)

integer.example_args = (S((8, 32), jnp.int8), S((32, 16), jnp.int8))
'''


@pytest.fixture
def module(tmp_path, monkeypatch, request):
    name = f"ptq_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    return name


def test_evaluate_reports_the_quantised_models_sqnr(run_cli, module):
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", f"{module}:mlp", "--json")
    assert code == 0, err
    channel = json.loads(out)["accuracy"]["sqnr_db"]
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", f"{module}:mlp:quant=tensor", "--json")
    assert code == 0, err
    tensor = json.loads(out)["accuracy"]["sqnr_db"]
    # the matrix-product estimate knows nothing of the folded scale: one figure for both
    wl = resolve(f"{module}:mlp")
    assert "quantised float model" in sqnr_source(wl, "int8", "int8")
    assert channel > 30.0 > tensor + 5.0  # w1's columns 400x apart (tests/workloads/test_ptq.py)


def test_a_calibration_file_is_used(run_cli, module, tmp_path):
    np.savez(tmp_path / "cal.npz", np.random.default_rng(1).standard_normal((3, 8, 32)).astype(np.float32) * 0.01)
    spec = f"{module}:mlp:calib=cal.npz"
    wl = resolve(spec)
    assert "3 samples of cal.npz" in sqnr_source(wl, "int8", "int8")
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", spec, "--json")
    assert code == 0, err
    assert json.loads(out)["accuracy"]["sqnr_db"] == pytest.approx(workload_sqnr_db(wl, "int8", "int8"))


def test_an_integer_model_keeps_the_estimate(module):
    wl = resolve(f"{module}:integer")
    assert "matrix products on normal data" in sqnr_source(wl, "int8", "int8")
    assert 20 < workload_sqnr_db(wl, "int8", "int8") < 60


@pytest.mark.parametrize(("options", "message"), [
    ("quant=row", "quant must be tensor or channel, not 'row'"),
    ("calib=x.txt", "calib must name a .npz file"),
    ("samples=0", "samples must be an integer in [1, 64]"),
    ("seq=4", "a function's options are quant="),
])
def test_bad_function_options_are_one_line(run_cli, module, options, message):
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", f"{module}:mlp:{options}")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_a_missing_calibration_file_is_one_line(run_cli, module):
    code, _, err = run_cli("evaluate", "--design", "edge", "--workload", f"{module}:mlp:calib=none.npz")
    assert code == 2 and "existing .npz file" in err and len(err.strip().splitlines()) == 1, err


def test_in_process_and_child_agree(module):
    from workloads._ptq import quantise_model
    from workloads._user import load_user_function

    fn, args = load_user_function(f"{module}:mlp")
    want = quantise_model(fn, args, "int8", "int8").sqnr_db
    assert workload_sqnr_db(resolve(f"{module}:mlp"), "int8", "int8") == pytest.approx(want, abs=1e-9)
