"""Bounds MLIR text is held to before MLIR's native parser sees it (no JAX, no MLIR import).

MLIR's parser recurses once per nesting level of brackets in an attribute or type: a 40 KB
file of 20,000 nested ``[`` overflows the native stack and kills the process (a segmentation
fault, no message). :func:`check_mlir_text` counts the depth of ``( [ { <`` outside string
literals and ``//`` comments in one pass and refuses a text deeper than
:data:`MAX_MLIR_DEPTH` or larger than :data:`MAX_MLIR_BYTES`. Real modules nest a few tens of
levels (regions in regions, a rank-N ``dense<[[...]]>`` constant).
"""

from __future__ import annotations

import re

from accel_spec.errors import WorkloadError

__all__ = ["MAX_MLIR_DEPTH", "MAX_MLIR_BYTES", "check_mlir_text"]

#: Deepest nesting of brackets (``( [ { <`` together) accepted in MLIR text.
MAX_MLIR_DEPTH = 256
#: Largest MLIR text accepted, in bytes (UTF-8).
MAX_MLIR_BYTES = 256 * 2**20

#: A string literal (escapes inside), a line comment, the ``->`` of a function type, or a bracket.
_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|->|[\[\](){}<>]')
_OPEN = frozenset("([{<")


def check_mlir_text(text: str, what: str) -> None:
    """Refuse MLIR text nested deeper than :data:`MAX_MLIR_DEPTH` or larger than :data:`MAX_MLIR_BYTES`.

    Raises:
        WorkloadError: naming the file, the line and the limit.
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_MLIR_BYTES:
        raise WorkloadError(f"{what} holds {size:,} bytes of MLIR text; the limit is {MAX_MLIR_BYTES:,}")
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if len(token) != 1:  # a string, a comment or "->"
            continue
        if token in _OPEN:
            depth += 1
            if depth > MAX_MLIR_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise WorkloadError(f"{what} line {line}: brackets nest more than {MAX_MLIR_DEPTH} deep; "
                                    f"MLIR text is read up to {MAX_MLIR_DEPTH} levels of ( [ {{ <")
        elif depth:
            depth -= 1
