"""Each contract fact of the RTL and the model is defined once, on the foundation floor (``accel_spec``).

The RTL and the model import these names from their home; a module that assigns one of them, or
defines a function or class of that name, restates the fact and may drift from it. The check reads
the source with ``ast`` (assignments, annotated assignments, ``def`` and ``class`` at any depth) of
every module of the project and of ``bench/``. Importing a name (``from accel_spec.isa import
DRAM_LATENCY as DEFAULT_DRAM_LATENCY``) is not a definition.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("accel_spec", "accel_dse", "perf_model", "rtl_gen", "workloads", "bench")

#: Fact -> the one module that defines it.
HOMES: dict[str, str] = {
    "DATAFLOW_CODES": "accel_spec/config.py",
    "CHECKSUM_DATAFLOWS": "accel_spec/config.py",
    "_MAPPED_DIMS": "accel_spec/config.py",
    "mapped_dims": "accel_spec/config.py",
    "OUTSTANDING": "accel_spec/isa.py",
    "CHECK_LATENCY": "accel_spec/isa.py",
    "DRAM_LATENCY": "accel_spec/isa.py",
    "DEFAULT_DRAM_LATENCY": "accel_spec/isa.py",  # the model's name for DRAM_LATENCY: an import alias only
    "OUTPUT_STAGE_LATENCY": "accel_spec/isa.py",
    "MAX_AXI_DATA_BYTES": "accel_spec/isa.py",
    "axi_data_bytes": "accel_spec/isa.py",
    "FIELDS": "accel_spec/isa.py",
    "PARAM_FIELDS": "accel_spec/vector_isa.py",
    "product_bits": "accel_spec/number_formats.py",
    "checksum_weight_bits": "accel_spec/config.py",
    "pe_cell": "accel_spec/number_formats.py",
    "MAX_POWER_DENSITY_W_MM2": "accel_spec/config.py",
}

#: Functions of a fact's name outside its home that take another argument and call the home's
#: definition (checked: the file imports it, or its home module).
WRAPPERS: dict[tuple[str, str], str] = {
    ("perf_model/program_timing.py", "axi_data_bytes"): "the width of one ArrayConfig",
    ("rtl_gen/core/pe.py", "product_bits"): "a PE encoding name and the integer datapath's width",
}

#: Literals that spell a fact out (the dataflow codes as a table).
LITERALS = {"{'ws': 0, 'os': 1, 'is': 2}": "DATAFLOW_CODES"}


def _home_module(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def definitions(root: Path = REPO) -> list[str]:
    """``file: name`` for every definition of a fact outside its home (wrappers aside)."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(), filename=rel)
            imported = {(node.module, alias.name) for node in ast.walk(tree)
                        if isinstance(node, ast.ImportFrom) for alias in node.names}
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Assign):
                    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
                    names = [node.target.id]
                elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                    names = [node.name]
                elif isinstance(node, ast.Dict):
                    try:
                        literal = repr(ast.literal_eval(node))
                    except ValueError:
                        continue
                    if literal in LITERALS and rel != HOMES[LITERALS[literal]]:
                        found.append(f"{rel}:{node.lineno}: the {LITERALS[literal]} table")
                    continue
                for name in names:
                    home = HOMES.get(name)
                    if home is None or rel == home:
                        continue
                    module = _home_module(home)
                    if (rel, name) in WRAPPERS and {(module, name), tuple(module.rsplit(".", 1))} & imported:
                        continue
                    found.append(f"{rel}:{node.lineno}: {name} (home: {home})")
    return found


def test_each_fact_is_defined_once():
    assert definitions() == []


def test_each_fact_is_defined_at_its_home():
    for name, home in HOMES.items():
        if name == "DEFAULT_DRAM_LATENCY":
            continue
        tree = ast.parse((REPO / home).read_text())
        defined = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
                   if isinstance(t, ast.Name)}
        defined |= {n.target.id for n in ast.walk(tree) if isinstance(n, ast.AnnAssign)
                    and isinstance(n.target, ast.Name)}
        defined |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        assert name in defined, f"{name} is not defined in {home}"


def test_the_check_finds_a_redefinition(tmp_path):
    """A constant restated, a function re-implemented, the codes spelled out and a wrapper that does
    not import its home are each reported; an import alias is not."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "accel_spec" / "isa.py").write_text("OUTSTANDING = 8\n")
    (tmp_path / "perf_model" / "program_timing.py").write_text(
        "from accel_spec.isa import DRAM_LATENCY as DEFAULT_DRAM_LATENCY\nOUTSTANDING = 8\n"
        "def axi_data_bytes(config):\n    return 4\n")
    (tmp_path / "rtl_gen" / "regmap.py").write_text("CODES = {'ws': 0, 'os': 1, 'is': 2}\n")
    (tmp_path / "rtl_gen" / "core").mkdir()
    (tmp_path / "rtl_gen" / "core" / "pe.py").write_text("def product_bits(name, bits):\n    return 2 * bits\n")
    assert definitions(tmp_path) == [
        "perf_model/program_timing.py:2: OUTSTANDING (home: accel_spec/isa.py)",
        "perf_model/program_timing.py:3: axi_data_bytes (home: accel_spec/isa.py)",
        "rtl_gen/core/pe.py:1: product_bits (home: accel_spec/number_formats.py)",
        "rtl_gen/regmap.py:1: the DATAFLOW_CODES table",
    ]
