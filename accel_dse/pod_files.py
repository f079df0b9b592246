"""System files (TOML) and the system presets shipped with accel-dse.

A system file holds the chip as a ``[design]`` table (the design-file format, or
``chip = "PRESET|FILE"`` inside ``[system]`` naming a design preset or design file), one
``[system]`` table of :class:`SystemConfig` fields, and optionally ``[system.split]`` (or a
top-level ``[split]``) with :class:`Split` fields::

    [design]
    rows = 128
    cols = 128

    [system]
    topology = "torus3d"
    dims = [4, 4, 4]
    link_gb_per_s = 50.0
    hbm_gib = 32.0

    [system.split]     # optional: without it, ``accel-dse system evaluate`` searches the splits
    dp = 16
    tp = 4

A design file with a ``[system]`` table is a system file. Presets live in
``accel_dse/systems/<name>.toml``; errors are :class:`ConfigError` naming the file and the field.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from accel_dse.design_files import design_from_document, load_design, parse_toml, read_toml
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError
from accel_spec.pod_config import Split, SystemConfig

__all__ = ["load_system", "system_preset_names", "parse_system_toml", "system_from_document", "llm_job_from_table",
           "LLM_KEYS"]

#: Keys of an ``[llm]`` table (the job of a system sweep): ``model`` is a spec such as ``"llama70b"``.
LLM_KEYS = ("model", "mode", "batch", "seq", "gen", "fused_attention")


def system_preset_names() -> list[str]:
    """Names of the shipped system presets, sorted."""
    folder = resources.files("accel_dse") / "systems"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def parse_system_toml(text: str, *, source: str = "system") -> tuple[SystemConfig, Split | None]:
    """The system (and its split, if the file gives one) from a system file's text."""
    return system_from_document(parse_toml(text, source=source), source=source)


def system_from_document(doc: dict[str, Any], *, source: str) -> tuple[SystemConfig, Split | None]:
    """Build the system and the optional split from a parsed system file."""
    extra = [k for k in doc if k not in ("design", "system", "split")]
    if extra:
        raise ConfigError(f"{source}: unknown top-level key {extra[0]!r} (a system file holds [design], "
                          "[system] and optionally [split])")
    table = doc.get("system")
    if not isinstance(table, dict):
        raise ConfigError(f"{source} has no [system] table" if table is None
                          else f"{source}: 'system' must be a table, not {table!r}")
    table = dict(table)
    split_table = table.pop("split", None)
    if "split" in doc:
        if split_table is not None:
            raise ConfigError(f"{source}: give the split once, as [split] or [system.split], not both")
        split_table = doc["split"]
    chip_spec = table.pop("chip", None)
    try:
        chip = _chip(doc, chip_spec, source)
        system = SystemConfig.from_dict(table, chip)
        split = Split.from_dict(split_table, where="[split]") if split_table is not None else None
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return system, split


def _chip(doc: dict[str, Any], spec: object, source: str) -> ArrayConfig:
    if spec is not None and "design" in doc:
        raise ConfigError("give the chip once: a [design] table or system.chip, not both")
    if spec is not None:
        if not isinstance(spec, str):
            raise ConfigError(f"system chip must be a design preset name or file, not {spec!r}")
        return load_design(spec)
    if "design" not in doc:
        raise ConfigError("the chip is missing: give a [design] table or system.chip = \"PRESET|FILE\"")
    return design_from_document({"design": doc["design"]}, source=source)


def load_system(spec: str | Path) -> tuple[SystemConfig, Split | None]:
    """A system from a file path or a system preset name (see the module docstring)."""
    text = str(spec)
    path = Path(text)
    if path.exists() or text.endswith(".toml") or "/" in text or "\\" in text:
        return system_from_document(read_toml(path, "system file"), source=f"system file {text!r}")
    if text in system_preset_names():
        body = (resources.files("accel_dse") / "systems" / f"{text}.toml").read_text("utf-8")
        return parse_system_toml(body, source=f"system preset {text!r}")
    raise ConfigError(f"system {text!r} is neither a system file nor a preset "
                      f"(presets: {', '.join(system_preset_names())})")


def llm_job_from_table(table: object, *, where: str = "[llm]") -> Any:
    """The ``LlmJob`` of an ``[llm]`` table (``model``, ``mode``, ``batch``, ``seq``, ``gen``,
    ``fused_attention``); errors are one-line ``ConfigError`` naming the key."""
    from accel_spec.errors import WorkloadError
    from workloads.llm_ops import LlmJob, parse_llm_spec

    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table with model, mode, batch, seq, gen, not {table!r}")
    for key in table:
        if key not in LLM_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(LLM_KEYS)})")
    model = table.get("model")
    if not isinstance(model, str):
        raise ConfigError(f"{where}: model must be an LLM name such as \"llama70b\", not {model!r}")
    fields = {k: table[k] for k in LLM_KEYS[1:] if k in table}
    try:
        return LlmJob(shape=parse_llm_spec(model), **fields)
    except WorkloadError as exc:
        raise ConfigError(f"{where}: {exc}") from None
