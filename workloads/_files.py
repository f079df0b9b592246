"""Workload files: which specs name a file, which format it holds, and reading it.

A file spec is ``PATH[:k=v,...]``. It is taken for a file (rather than a builtin or
``package.module:function``) when ``PATH`` ends in one of :data:`SUFFIXES`, contains a ``/``,
or is an existing file; relative paths are from the current directory. The format comes from
the suffix (``.onnx``; ``.mlir`` / ``.mlirbc``; ``.csv``; ``.yaml`` / ``.yml``) and, for any
other suffix (a ``jax.export`` artefact is often ``.bin``), from the content. Options are
integers: for ONNX ``batch`` and symbolic dimension names (:mod:`workloads._onnx`); other
formats take none. A ``.json`` file is a Hugging Face ``config.json`` (:mod:`workloads._hf_config`:
options ``seq``, ``batch``, ``kv``, ``layers``). A ``.pt2`` file saved by ``torch.export.save`` is
lowered through :mod:`workloads._torch_trace`; a pickled PyTorch file (``.pt``, ``.pth``) is refused
with the ways in (``file.py:fn``, ``torch.export``, ``torch.onnx.export``). ``file.py:fn`` is a
user's model, not a file spec.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

from accel_spec.errors import WorkloadError
from accel_spec.text import INT_RULE, parse_int, shown
from workloads._op_limits import check_ops
from workloads.ops import Workload

__all__ = ["SUFFIXES", "split_file_spec", "load_file", "MAX_OPTION"]

#: Options whose value is a word, not an integer (a Hugging Face config's ``mode=prefill|decode``).
WORD_OPTIONS = ("mode",)
#: Largest value of a workload option: a file's (ONNX dimensions are int64 in the file, but no
#: tensor needs more) and a builtin's dimension.
MAX_OPTION = 2**31 - 1

SUFFIXES = (".onnx", ".mlir", ".mlirbc", ".csv", ".yaml", ".yml", ".json", ".pt", ".pth", ".pt2")
_FORMATS = ("ONNX, StableHLO (MLIR text or bytecode, a jax.export artefact), a SCALE-Sim CSV, a Timeloop YAML "
            "or a Hugging Face config.json")
#: Suffixes of pickled PyTorch files: refused with the ways in (docs/workloads.md, "PyTorch").
_TORCH_SUFFIXES = (".pt", ".pth")
_TORCH_HINT = ("is a pickled PyTorch file, which holds weights but no program: give file.py:fn where fn() returns "
               "(module, example_args), or save torch.export.export(module, args) with torch.export.save as a .pt2, "
               "or export it with torch.onnx.export (docs/workloads.md, \"PyTorch\")")


def _looks_like_path(path: str) -> bool:
    return path.lower().endswith(SUFFIXES) or "/" in path or os.sep in path or os.path.isfile(path)


def split_file_spec(spec: str) -> tuple[str, tuple[tuple[str, int | str], ...]] | None:
    """``(path, options)`` if ``spec`` names a file, else ``None``.

    Raises:
        WorkloadError: for malformed options (``k=v`` with a positive integer ``v``).
    """
    head, colon, _ = spec.partition(":")
    if colon and head.lower().endswith(".py"):
        return None  # file.py:function, a user's model (workloads._user)
    path, sep, rest = spec.rpartition(":")
    if not sep or "=" not in rest or not _looks_like_path(path):
        return (spec, ()) if _looks_like_path(spec) else None
    options: dict[str, int | str] = {}
    for item in rest.split(","):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or not key:
            raise WorkloadError(f"{path} options must be k=v pairs separated by commas, not "
                                f"{shown(repr(item.strip()), 40)}")
        if key in options:
            raise WorkloadError(f"{path} option {shown(key, 40)} is given twice")
        if key in WORD_OPTIONS and not value.lstrip("+-").isdigit():
            options[key] = value  # checked by the reader (a Hugging Face config's mode=prefill|decode)
            continue
        number = parse_int(value)
        if number is None or number < 1:
            raise WorkloadError(f"{path} option {shown(key, 40)} must be a positive integer, "
                                f"not {shown(repr(value), 40)} ({INT_RULE})")
        if number > MAX_OPTION:
            raise WorkloadError(f"{path} option {shown(key, 40)} must be at most {MAX_OPTION:,}, not {number:,}")
        options[key] = number
    return path, tuple(options.items())


def _parses_as_onnx(data: bytes) -> bool:
    """True if ``data`` decodes as an ONNX ``ModelProto`` with an IR version and graph nodes."""
    import onnx

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:  # protobuf's DecodeError
        return False
    return model.ir_version > 0 and model.HasField("graph") and len(model.graph.node) > 0


def _sniff(data: bytes) -> str:
    """The format of a file whose suffix does not say: ``"stablehlo"`` or ``"onnx"`` (or ``""``)."""
    from workloads._stablehlo import MLIR_MAGIC, artefact_module

    if data.startswith(MLIR_MAGIC) or artefact_module(data) is not None:
        return "stablehlo"
    head = data[:4096]
    if b"stablehlo." in head or b"func.func" in head or head.lstrip().startswith(b"module"):
        return "stablehlo"
    if _parses_as_onnx(data):
        return "onnx"
    return ""


def _format(path: Path, data: bytes) -> str:
    suffix = path.suffix.lower()
    return {".onnx": "onnx", ".mlir": "stablehlo", ".mlirbc": "stablehlo", ".csv": "scalesim",
            ".yaml": "timeloop", ".yml": "timeloop", ".json": "hf_config"}.get(suffix) or _sniff(data)


@functools.lru_cache(maxsize=32)
def _load_cached(path: str, stamp: tuple[int, int], options: tuple[tuple[str, int | str], ...], spec: str) -> Workload:
    del stamp  # part of the cache key only: a rewritten file is read again
    what = spec.rpartition(":")[0] if options else spec
    workload = _read(Path(path), options, spec, what)
    check_ops(workload.ops, what)  # its tensors' sizes, before anything is allocated for them
    return workload


def _read(file: Path, options: tuple[tuple[str, int | str], ...], spec: str, what: str) -> Workload:
    if file.suffix.lower() in _TORCH_SUFFIXES:
        raise WorkloadError(f"workload file {what!r} {_TORCH_HINT}")
    if file.suffix.lower() == ".pt2":
        if options:
            raise WorkloadError(f"{what} takes no options (an exported program's shapes are fixed), "
                                f"not {', '.join(k for k, _ in options)}")
        from workloads._torch_trace import load_pt2, trace_torch

        return trace_torch(load_pt2(str(file), what), name=spec, description=f"torch.export program {file.name}",
                           source="torch_export")
    data = file.read_bytes()
    kind = _format(file, data)
    if kind == "hf_config":
        from workloads._hf_config import load_hf_config

        return load_hf_config(file, dict(options), name=spec, what=what)
    numbers = {k: v for k, v in options if isinstance(v, int)}
    if len(numbers) < len(options):
        word = next(k for k, v in options if not isinstance(v, int))
        raise WorkloadError(f"{what} option {word} is a Hugging Face config.json's (mode=prefill|decode)")
    if kind == "onnx":
        from workloads._onnx import load_onnx

        return load_onnx(file, numbers, name=spec, what=what)
    if not kind:
        raise WorkloadError(f"workload file {what!r} is not {_FORMATS} (name it .onnx, .mlir, .csv, .yaml or .json "
                            "if it is one)")
    if options:
        raise WorkloadError(f"{what} takes no options (only ONNX files do: batch=N and symbolic dims), "
                            f"not {', '.join(k for k, _ in options)}")
    if kind == "stablehlo":
        from workloads._stablehlo import load_stablehlo

        return load_stablehlo(data, name=spec, what=what)
    from workloads._topology import load_scalesim_csv, load_timeloop_yaml

    readers: dict[str, Callable[..., Workload]] = {"scalesim": load_scalesim_csv, "timeloop": load_timeloop_yaml}
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise WorkloadError(f"{what} is not a text file (a {kind} file is UTF-8 text)") from None
    return readers[kind](text, name=spec, what=what)


def load_file(path: str, options: tuple[tuple[str, int | str], ...], spec: str) -> Workload:
    """Read the workload file ``path`` (cached while the file is unchanged).

    Raises:
        WorkloadError: the file does not exist or is not a regular file, is in none of the
            formats, or its reader rejects it.
    """
    file = Path(path).expanduser()
    if not file.exists():
        raise WorkloadError(f"workload file {path!r} does not exist")
    if not file.is_file():
        raise WorkloadError(f"workload file {path!r} is not a file")
    info = file.stat()
    try:
        return _load_cached(str(file.resolve()), (info.st_mtime_ns, info.st_size), options, spec)
    except OSError as exc:
        raise WorkloadError(f"workload file {path!r} cannot be read: {exc.strerror}") from exc
