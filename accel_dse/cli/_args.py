"""Argument types shared by the subcommands."""

from __future__ import annotations

import argparse

from accel_spec.text import INT_RULE, parse_int, shown

__all__ = ["ascii_int"]


def ascii_int(text: str) -> int:
    """An argparse ``type``: an integer written with ASCII digits (``int()`` would take ``８`` and ``1_000``)."""
    value = parse_int(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"must be an integer {INT_RULE}, not {shown(repr(text), 60)}")
    return value
