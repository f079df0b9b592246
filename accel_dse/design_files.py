"""Design files (TOML) and the presets shipped with accel-dse.

A design file holds one ``[design]`` table whose keys are :class:`ArrayConfig` fields::

    [design]
    rows = 16
    cols = 16
    dataflow = "ws"

Parse -> validate -> build: :func:`load_design` returns an :class:`ArrayConfig` or raises
:class:`ConfigError` with the file, the field, the rule and the bad value; raw dicts never
leave this module. Presets live in ``accel_dse/presets/<name>.toml``.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError, ConfigErrors

__all__ = ["load_design", "load_design_file", "parse_design_toml", "preset_names", "load_preset"]


def preset_names() -> list[str]:
    """Names of the shipped presets, sorted."""
    folder = resources.files("accel_dse") / "presets"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_preset(name: str) -> ArrayConfig:
    """The preset called ``name``; ``ConfigError`` listing the presets if there is none."""
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r} (presets: {', '.join(preset_names())})")
    text = (resources.files("accel_dse") / "presets" / f"{name}.toml").read_text("utf-8")
    return parse_design_toml(text, source=f"preset {name!r}")


def read_toml(path: Path, what: str = "design file") -> dict[str, Any]:
    """Read and parse a TOML file, turning every failure into one ``ConfigError`` line."""
    if not path.exists():
        raise ConfigError(f"{what} {str(path)!r} not found")
    if path.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is a directory, not a TOML file")
    if not path.is_file():  # a FIFO would block, a device never end
        raise ConfigError(f"{what} {str(path)!r} is not a regular file (a FIFO, device or socket)")
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {exc}") from exc
    return parse_toml(text, source=f"{what} {str(path)!r}")


def parse_toml(text: str, *, source: str) -> dict[str, Any]:
    """Parse TOML text; empty text and syntax errors (with line/column) are ``ConfigError``."""
    if not text.strip():
        raise ConfigError(f"{source} is empty")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not valid TOML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{source} is nested too deeply to parse (Python's recursion limit)") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300 by default)
        raise ConfigError(f"{source} holds a number too long to read: {str(exc).partition(';')[0]}") from None


def parse_design_toml(text: str, *, source: str = "design") -> ArrayConfig:
    """Build an ``ArrayConfig`` from the text of a design file."""
    return design_from_document(parse_toml(text, source=source), source=source)


def design_from_document(doc: dict[str, Any], *, source: str) -> ArrayConfig:
    """Build an ``ArrayConfig`` from a parsed design document (one ``[design]`` table).

    Every problem found in one pass is reported, each on its own line
    (:class:`~accel_spec.errors.ConfigErrors`): unknown top-level keys and the table's own.
    """
    problems = [f"{source}: unknown top-level key {k!r} (a design file holds one [design] table)"
                for k in doc if k not in ("design", "system", "split")]  # a system file holds a design too
    table = doc.get("design")
    if "design" not in doc:
        problems.append(f"{source} has no [design] table")
    elif not isinstance(table, dict):
        problems.append(f"{source}: 'design' must be a table, not {table!r}")
    else:
        try:
            config = ArrayConfig.from_dict(table, where="[design]")
        except ConfigErrors as exc:
            problems += exc.prefixed(f"{source}: ").messages
        except ConfigError as exc:
            problems.append(f"{source}: {exc}")
        else:
            if not problems:
                return config
    raise ConfigErrors.of(problems)


def load_design_file(path: str | Path) -> ArrayConfig:
    """Load a design file from ``path``."""
    path = Path(path)
    return design_from_document(read_toml(path), source=f"design file {str(path)!r}")


def load_design(spec: str | Path) -> ArrayConfig:
    """Load a design from a file path or a preset name.

    A path that exists is read as a file; otherwise a preset name is looked up; a spec that
    looks like a path (``.toml`` suffix or a separator) and does not exist is a missing file.
    """
    text = str(spec)
    path = Path(text)
    if path.exists() or text.endswith(".toml") or "/" in text or "\\" in text:
        return load_design_file(path)
    if text in preset_names():
        return load_preset(text)
    raise ConfigError(
        f"design {text!r} is neither a design file nor a preset (presets: {', '.join(preset_names())})"
    )
