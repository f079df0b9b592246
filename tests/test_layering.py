"""The layering of DESIGN.md, checked on the source with ``ast`` (not by eye).

* ``accel_dse.config``, ``accel_dse.errors`` and ``accel_dse.commands`` (the command encoding the
  RTL decodes and the compiler emits): the standard library only (config may use errors).
* ``rtl_gen``: the standard library, amaranth, those three leaves, itself.
* ``perf_model``: never rtl_gen, amaranth, cocotb, jax, optuna; from ``workloads`` only the op records.
* ``workloads``: never rtl_gen, perf_model, amaranth, cocotb, optuna; ``workloads.ops`` no jax.
* ``accel_dse.search``: never rtl_gen, cocotb, amaranth; jax only in the RL agent's modules.
* ``import accel_dse`` stays light: no jax, amaranth, optuna or numpy.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def imports_of(path: Path) -> set[str]:
    """Absolute dotted names imported by one file (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def files(package: str) -> list[Path]:
    root = REPO / package.replace(".", "/")
    if root.with_suffix(".py").is_file():
        return [root.with_suffix(".py")]
    return sorted(root.rglob("*.py"))


def top(name: str) -> str:
    return name.split(".")[0]


def violations(package: str, allowed) -> list[str]:
    found = []
    for path in files(package):
        for name in sorted(imports_of(path)):
            if not allowed(name, path):
                found.append(f"{path.relative_to(REPO)} imports {name}")
    return found


def test_rules_cover_existing_packages():
    for package in ("accel_dse", "perf_model", "rtl_gen", "workloads"):
        assert (REPO / package / "__init__.py").is_file()


@pytest.mark.parametrize("module", ["accel_dse.config", "accel_dse.errors", "accel_dse.commands"])
def test_leaves_use_stdlib_only(module):
    def allowed(name, _path):
        return top(name) in STDLIB or name.startswith("accel_dse.errors")

    assert violations(module, allowed) == []


def test_rtl_gen_imports_only_amaranth_config_and_the_command_encoding():
    ok_prefixes = ("amaranth", "accel_dse.config", "accel_dse.errors", "accel_dse.commands", "rtl_gen")

    def allowed(name, _path):
        return top(name) in STDLIB or name.startswith(ok_prefixes) or name == "accel_dse"

    bad = [v for v in violations("rtl_gen", allowed) if not v.endswith(" accel_dse")]
    assert bad == []


def test_perf_model_never_imports_rtl_or_simulators():
    banned = ("rtl_gen", "amaranth", "cocotb", "cocotb_tools", "jax", "optuna")

    def allowed(name, _path):
        if top(name) in banned:
            return False
        if top(name) == "workloads":
            return name == "workloads" or name.startswith("workloads.ops")
        if top(name) == "accel_dse":
            leaves = ("accel_dse.config", "accel_dse.errors", "accel_dse.commands")
            return name.startswith(leaves) or name == "accel_dse"
        return True

    assert violations("perf_model", allowed) == []


def test_workloads_stay_below_the_model():
    banned = ("rtl_gen", "perf_model", "amaranth", "cocotb", "optuna")
    assert violations("workloads", lambda n, _p: top(n) not in banned) == []
    if (REPO / "workloads" / "ops.py").exists():
        assert violations("workloads.ops", lambda n, _p: top(n) != "jax") == []


def test_search_sees_configs_and_metrics_only():
    if not (REPO / "accel_dse" / "search").is_dir():
        pytest.fail("accel_dse/search is missing")

    def allowed(name, path):
        if top(name) in ("rtl_gen", "cocotb", "cocotb_tools", "amaranth"):
            return False
        if top(name) == "jax":
            return "rl" in path.stem or "agent" in path.stem
        return True

    assert violations("accel_dse.search", allowed) == []


def test_import_accel_dse_is_light():
    code = (
        "import sys, accel_dse, accel_dse.config, accel_dse.errors, accel_dse.designs\n"
        "heavy = [m for m in ('jax', 'amaranth', 'optuna', 'numpy', 'cocotb') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == ""


def test_checker_catches_a_violation(tmp_path, monkeypatch):
    """The rule engine itself can fail: a fake rtl_gen file importing numpy is reported."""
    fake = tmp_path / "rtl_gen"
    fake.mkdir()
    (fake / "__init__.py").write_text("import numpy\nfrom amaranth import Elaboratable\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    bad = violations("rtl_gen", lambda n, _p: top(n) in STDLIB or n.startswith("amaranth"))
    assert bad == ["rtl_gen/__init__.py imports numpy"]
