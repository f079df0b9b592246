"""The layering of DESIGN.md, checked on the source with ``ast`` (not by eye).

* The packages sit on floors (:data:`PACKAGE_FLOORS`): ``accel_spec`` (the accelerator's specification:
  ``ArrayConfig``, errors, number formats, the command ISA, the vector ISA, the system config, text)
  at the bottom, importing the standard library only; ``workloads`` and ``rtl_gen`` over it;
  ``perf_model`` over ``workloads``; ``accel_dse`` (the CLI and the tools: search, simulate, export,
  report, verify, sdc) on top. A module imports its own package and lower floors only.
* No module imports another package's underscore module: ``a.b._c`` is for ``a.b`` and what lies
  inside it (:func:`underscore_violations`).
* ``rtl_gen``: the standard library, amaranth, ``accel_spec``, itself.
* ``perf_model``: never rtl_gen, amaranth, cocotb, jax, optuna; from ``workloads`` only the op records
  (``workloads.ops``, ``workloads.vector_ops``, and ``workloads.llm_ops``: the op records of LLM
  layers, stdlib only).
* ``workloads``: never rtl_gen, perf_model, amaranth, cocotb, optuna; ``workloads.ops`` no jax.
* ``accel_dse.search``: never rtl_gen, cocotb, amaranth; jax only in the RL agent's modules.
* ``import accel_dse`` stays light: no jax, amaranth, optuna or numpy.
* No import cycle between any two modules of the project, imports inside functions included
  (:data:`ALLOWED_CYCLES` would name one allowed for a while; none is).
* Inside ``perf_model``, ``rtl_gen`` and ``accel_dse.search`` the subpackages sit on floors
  (:data:`FLOORS`, docs/architecture.md): a module imports its own subpackage and lower floors only.
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


def test_spec_uses_stdlib_only():
    assert violations("accel_spec", lambda name, _path: top(name) in STDLIB or top(name) == "accel_spec") == []


def test_rtl_gen_imports_only_amaranth_config_and_the_command_encoding():
    def allowed(name, _path):
        return top(name) in STDLIB or top(name) in ("amaranth", "accel_spec", "rtl_gen")

    assert violations("rtl_gen", allowed) == []


def test_perf_model_never_imports_rtl_or_simulators():
    banned = ("rtl_gen", "amaranth", "cocotb", "cocotb_tools", "jax", "optuna")

    def allowed(name, _path):
        if top(name) in banned:
            return False
        if top(name) == "workloads":
            records = ("workloads.ops", "workloads.vector_ops", "workloads.llm_ops")
            return name == "workloads" or name.startswith(records)
        return top(name) != "accel_dse"

    assert violations("perf_model", allowed) == []


def test_workloads_stay_below_the_model():
    banned = ("rtl_gen", "perf_model", "amaranth", "cocotb", "optuna")
    assert violations("workloads", lambda n, _p: top(n) not in banned) == []
    if (REPO / "workloads" / "ops.py").exists():
        assert violations("workloads.ops", lambda n, _p: top(n) != "jax") == []
    assert violations("workloads.llm_ops", lambda n, _p: top(n) != "jax") == []


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
        "import sys, accel_dse, accel_spec.config, accel_spec.errors, accel_dse.design_files\n"
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


# --- The module import graph: no cycle between modules, and the subpackages' floors -------------------------

#: The packages of the project whose modules make up the import graph.
PROJECT = ("accel_spec", "accel_dse", "perf_model", "rtl_gen", "workloads")

#: Floors of the packages, bottom (0) up: a module imports modules of its own package and of lower
#: floors only (never a package beside it on its floor).
PACKAGE_FLOORS: dict[str, int] = {"accel_spec": 0, "workloads": 1, "rtl_gen": 1, "perf_model": 2, "accel_dse": 3}

#: Cycles allowed for now, each as the packages its modules lie in -> the reason, e.g.
#: ``("accel_dse.export", "accel_dse.report"): "export <-> report, until the shared pieces move down"``.
#: None is left (the last, export <-> report, went with issue 25). An entry must go when its cycle
#: does (:func:`test_allowed_cycles_still_exist` says when).
ALLOWED_CYCLES: dict[tuple[str, ...], str] = {}

#: Floors of each package's subpackages, bottom (0) up: a module may import modules of its own
#: subpackage and of lower floors only (never a sibling on its floor). ``""`` is the package's own
#: top-level modules except its ``__init__`` (the public surface, which may import anything).
FLOORS: dict[str, dict[str, int]] = {
    "perf_model": {"": 0, "arrays": 1, "physical": 2, "fpga": 3, "evaluator": 3, "compiler": 4, "figures": 5, "pod": 6},
    "rtl_gen": {"core": 0, "soc": 1, "tools": 2},
    "accel_dse.search": {"space": 0, "samplers": 1, "study": 1, "scoring": 2, "": 3},
}


def module_files(root: Path | None = None) -> dict[str, Path]:
    """Every module of the project by dotted name (a package by its own name)."""
    root = REPO if root is None else root
    out: dict[str, Path] = {}
    for package in PROJECT:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(root: Path | None = None) -> dict[str, set[str]]:
    """Module -> the project modules it imports, at module level or inside functions (lazy imports)."""
    files = module_files(root)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    module = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` imports mod
                targets.update(f"{module}.{a.name}" if f"{module}.{a.name}" in files else module for a in node.names)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each as one cycle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(graph):  # Tarjan's algorithm, iterative
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return [_one_cycle(graph, set(c)) for c in components]


def _one_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the first module of a strongly connected component (breadth first)."""
    first = min(component)
    paths = {first: [first]}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == first:
                    return paths[node] + [first]
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {first}")  # a component of more than one module has one


def _allowed(cycle: list[str]) -> bool:
    return any(all(m.startswith(packages) for m in cycle) for packages in ALLOWED_CYCLES)


def test_no_import_cycle_between_modules():
    found = [" -> ".join(c) for c in cycles(import_graph()) if not _allowed(c)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_allowed_cycles_still_exist():
    """An allow-list entry whose cycle is gone must go too, so that the cycle cannot come back unseen."""
    found = cycles(import_graph())
    stale = [packages for packages in ALLOWED_CYCLES
             if not any(all(m.startswith(packages) for m in c) for c in found)]
    assert stale == [], f"no cycle left within {stale}: remove the entry from ALLOWED_CYCLES"


def test_cycle_finder_reports_a_lazy_import_cycle(tmp_path):
    """The graph sees imports inside functions, and the finder names the cycle's modules in order."""
    for package in PROJECT:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "perf_model" / "a.py").write_text("from perf_model import b\n")
    (tmp_path / "perf_model" / "b.py").write_text("def f():\n    from .c import x\n")
    (tmp_path / "perf_model" / "c.py").write_text("import perf_model.a\nx = 1\n")
    (tmp_path / "perf_model" / "d.py").write_text("from perf_model.a import b\n")
    assert cycles(import_graph(tmp_path)) == [["perf_model.a", "perf_model.b", "perf_model.c", "perf_model.a"]]


def floor_violations(package: str, floors: dict[str, int], graph: dict[str, set[str]]) -> list[str]:
    """Imports within ``package`` that go up a floor or sideways to a sibling subpackage."""

    def place(module: str) -> str | None:
        rest = module[len(package) + 1:] if module.startswith(package + ".") else None
        if rest is None:
            return None  # the package's __init__ or another package
        head, _, tail = rest.partition(".")
        return head if tail or head in floors else ""

    found = []
    for module, targets in sorted(graph.items()):
        own = place(module)
        if own is None:
            continue
        for target in sorted(targets):
            other = place(target)
            if target == package:
                found.append(f"{module} imports {package} (the public surface, above every floor)")
            elif other is not None and other != own and floors[other] >= floors[own]:
                found.append(f"{module} (floor {floors[own]}) imports {target} (floor {floors[other]})")
    return found


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_subpackages_import_only_downward(package):
    root = REPO / package.replace(".", "/")
    subpackages = {p.parent.name for p in root.glob("*/__init__.py")}
    assert subpackages == set(FLOORS[package]) - {""}, "every subpackage has a floor"
    assert floor_violations(package, FLOORS[package], import_graph()) == []


def test_floor_rule_can_fail():
    graph = {"perf_model.physical.area": {"perf_model.evaluator.design_ops", "perf_model.timing"},
             "perf_model.fpga.metrics": {"perf_model.evaluator.design_ops"},
             "perf_model.timing": {"perf_model.arrays.designs"},
             "perf_model.evaluator.design_ops": {"perf_model.evaluator.tiling", "perf_model"}}
    assert floor_violations("perf_model", FLOORS["perf_model"], graph) == [
        "perf_model.evaluator.design_ops imports perf_model (the public surface, above every floor)",
        "perf_model.fpga.metrics (floor 3) imports perf_model.evaluator.design_ops (floor 3)",
        "perf_model.physical.area (floor 2) imports perf_model.evaluator.design_ops (floor 3)",
        "perf_model.timing (floor 0) imports perf_model.arrays.designs (floor 1)",
    ]


# --- The floors of the packages, and underscore modules kept to their own package -------------------------


def package_violations(graph: dict[str, set[str]], floors: dict[str, int] = PACKAGE_FLOORS) -> list[str]:
    """Imports between packages that go up a floor or sideways to a package on the same floor."""
    found = []
    for module, targets in sorted(graph.items()):
        own = top(module)
        for target in sorted(targets):
            other = top(target)
            if other != own and floors[other] >= floors[own]:
                found.append(f"{module} ({own}, floor {floors[own]}) imports {target} ({other}, floor {floors[other]})")
    return found


def underscore_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports of an underscore module (``a.b._c``, or anything below it) from outside its package ``a.b``."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            parts = target.split(".")
            private = next((i for i, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")),
                           None)
            if private is None:
                continue
            owner = ".".join(parts[:private])
            if module != owner and not module.startswith(owner + "."):
                found.append(f"{module} imports {target} (private to {owner})")
    return found


def test_every_package_has_a_floor():
    assert set(PACKAGE_FLOORS) == set(PROJECT)


def test_packages_import_only_downward():
    assert package_violations(import_graph()) == []


def test_no_import_of_another_packages_underscore_module():
    assert underscore_violations(import_graph()) == []


def test_package_floor_rule_can_fail():
    graph = {"perf_model.timing": {"accel_dse.cli", "accel_spec.config", "perf_model.dma_timing"},
             "rtl_gen.core.pe": {"workloads.ops", "accel_spec.number_formats"},
             "accel_spec.isa": {"accel_spec.errors"},
             "workloads.ops": {"perf_model.timing"}}
    assert package_violations(graph) == [
        "perf_model.timing (perf_model, floor 2) imports accel_dse.cli (accel_dse, floor 3)",
        "rtl_gen.core.pe (rtl_gen, floor 1) imports workloads.ops (workloads, floor 1)",
        "workloads.ops (workloads, floor 1) imports perf_model.timing (perf_model, floor 2)",
    ]


def test_underscore_rule_can_fail():
    graph = {"accel_dse.export._soc": {"accel_dse.sdc._bench", "accel_dse.export._manifest"},
             "accel_dse.simulate.dram.driver": {"workloads._reference", "accel_dse.simulate.runner.build"},
             "perf_model.evaluator.one_design": {"perf_model._memory_parts"},
             "accel_dse.cli": {"accel_dse.cli._args"}}
    assert underscore_violations(graph) == [
        "accel_dse.export._soc imports accel_dse.sdc._bench (private to accel_dse.sdc)",
        "accel_dse.simulate.dram.driver imports workloads._reference (private to workloads)",
    ]
