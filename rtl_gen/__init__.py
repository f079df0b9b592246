"""Amaranth RTL generator: a parameterised TPU-style systolic-array accelerator.

Public surface: the components (:class:`PE`, :class:`Skew`, :class:`SystolicArray`,
:class:`Controller`, :class:`Accelerator`), the test-only :class:`Fault`, the buffer geometry
(:func:`buffer_layout`) and the port map (:data:`PORT_MAP`).
"""

from __future__ import annotations

from ._array import SystolicArray
from ._controller import Controller, mapped_dims
from ._layout import CYCLES_BITS, DIM_BITS, BufferGeometry, BufferLayout, buffer_layout
from ._pe import PE, Fault
from ._skew import Skew
from ._top import HOST_SEL, Accelerator, top_name
from ._top import __doc__ as PORT_MAP

__all__ = [
    "PE",
    "Fault",
    "Skew",
    "SystolicArray",
    "Controller",
    "Accelerator",
    "BufferGeometry",
    "BufferLayout",
    "buffer_layout",
    "mapped_dims",
    "top_name",
    "HOST_SEL",
    "PORT_MAP",
    "DIM_BITS",
    "CYCLES_BITS",
]
