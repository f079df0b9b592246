"""The convolution window of a ``WINDOW`` command: its fields, and the walk the RTL makes.

A weight-stationary run with ``window`` set reads its ``A`` from an input band held in the
ifmap in NHWC order (``accel_spec.isa``, ``WINDOW``). :class:`ConvWindow` holds the fields the
compiler puts in the command, :meth:`ConvWindow.reads` is the reference of the address walk the
RTL's address generator (``rtl_gen.core.conv_addr``) makes: one ifmap word (or ``None``, a pad made
on chip) per streamed row of every row-fold.
"""

from __future__ import annotations

import dataclasses

from accel_spec.errors import ModelError
from accel_spec.isa import FIELDS, SIGNED_WINDOW_FIELDS, Command, Opcode

__all__ = ["ConvWindow"]


@dataclasses.dataclass(frozen=True)
class ConvWindow:
    """The window of one band (pixels, words; see ``accel_spec.isa``).

    Attributes:
        in_w, in_h: the band's input pixels across and its rows.
        out_w: output pixels per output row.
        stride_h, stride_w, dilation_h, dilation_w, kw: the kernel's strides, dilations and width.
        pad_top, pad_left: rows and columns of padding above and left of the band, as the run's
            first tap sees them (negative: band rows or columns it skips).
        cw: ifmap words per pixel in the band.
        cblocks: channel words a tap reads (row-folds per tap).
        image_rows: output rows an image when the run streams several images (their bands one
            after the other, ``image_rows * stride_h`` input rows apart), 0 for one image.
        pack: ``log2`` of the taps of a kernel row packed in one word (``T = 2 ** pack``; 0: one
            tap a word). Packed, ``kw`` counts groups of ``T`` taps, ``dilation_w`` is ``T``, a
            pixel is one word (``cw == cblocks == 1``) and the word of group start ``ix`` is the
            band's word ``ix + T - 1`` of its row (``perf_model.compiler.conv_pack``: the DMA's
            sliding load writes it when pixel ``ix + T - 1`` arrives).
    """

    in_w: int
    in_h: int
    out_w: int
    stride_h: int
    stride_w: int
    dilation_h: int
    dilation_w: int
    kw: int
    pad_top: int
    pad_left: int
    cw: int
    cblocks: int
    image_rows: int = 0
    pack: int = 0

    @property
    def taps_per_word(self) -> int:
        """``T``: taps of a kernel row in one word (1 unpacked)."""
        return 1 << self.pack

    @property
    def fields(self) -> dict[str, int]:
        """The ``WINDOW`` command's fields (``origin`` as a signed number)."""
        cw = self.cw
        return {"in_w": self.in_w, "in_h": self.in_h, "out_w": self.out_w, "stride_h": self.stride_h,
                "stride_w": self.stride_w, "dilation_h": self.dilation_h, "dilation_w": self.dilation_w,
                "kw": self.kw, "pad_top": self.pad_top, "pad_left": self.pad_left, "cblocks": self.cblocks,
                "origin": -(self.pad_top * self.in_w + self.pad_left) * cw + (self.taps_per_word - 1) * cw,
                "px_step": self.stride_w * cw,
                "row_step_w": self.stride_h * self.in_w * cw, "kx_step": self.dilation_w * cw,
                "ky_step": self.dilation_h * self.in_w * cw, "image_rows": self.image_rows,
                "pack": self.pack}

    def check(self, what: str) -> None:
        """Raise ``ModelError`` naming ``what`` and the field when a field does not fit its encoding."""
        for name, value in self.fields.items():
            width = FIELDS[name][1]
            signed = name in SIGNED_WINDOW_FIELDS
            low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
            if not low <= value <= high:
                raise ModelError(f"{what}: the convolution window's {name} must be in {low} .. {high} (its "
                                 f"{width}-bit field), not {value}")

    def command(self, *, what: str = "conv") -> Command:
        """The ``WINDOW`` command (fields checked: :meth:`check`; made once a window: a network's
        convs and a sweep's designs meet the same windows again)."""
        made = _COMMANDS.get(self)
        if made is None:
            self.check(what)
            fields = dict(self.fields)
            for name in SIGNED_WINDOW_FIELDS:
                fields[name] &= (1 << FIELDS[name][1]) - 1
            made = Command.make(Opcode.WINDOW, **fields)
            if len(_COMMANDS) >= _COMMANDS_SIZE:
                _COMMANDS.clear()
            _COMMANDS[self] = made
        return made

    def _pixel(self, fold: int, s: int) -> tuple[int, int, int, int]:
        """``(image, iy, ix, cb)`` row-fold ``fold`` reads for streamed row ``s`` (``ix``: the first
        tap's pixel of a packed group)."""
        tap, cb = divmod(fold, self.cblocks)
        ky, kx = divmod(tap, self.kw)
        oy, ox = divmod(s, self.out_w)
        image, oy = divmod(oy, self.image_rows) if self.image_rows else (0, oy)
        iy = oy * self.stride_h + ky * self.dilation_h - self.pad_top
        ix = ox * self.stride_w + kx * self.dilation_w - self.pad_left
        return image, iy, ix, cb

    def groups(self, fold: int, s: int) -> int:
        """The lane groups (bit ``t``: group ``t``, ``T`` groups) the read of row-fold ``fold`` for
        streamed row ``s`` keeps; the others are zero (pads). Unpacked: 1 or 0."""
        _, iy, ix, _ = self._pixel(fold, s)
        if not 0 <= iy < self.in_h:
            return 0
        return sum(1 << t for t in range(self.taps_per_word) if 0 <= ix + t < self.in_w)

    def read(self, fold: int, s: int) -> int | None:
        """The word (relative to the run's ``x_base``) row-fold ``fold`` reads for streamed row ``s``,
        or ``None`` for a pad (every lane group a pad, :meth:`groups`)."""
        if not self.groups(fold, s):
            return None
        image, iy, ix, cb = self._pixel(fold, s)
        return (((image * self.image_rows * self.stride_h + iy) * self.in_w + ix) * self.cw + cb
                + (self.taps_per_word - 1) * self.cw)

    def reads(self, row_folds: int, col_folds: int, m: int) -> list[int | None]:
        """Every read of a run of ``row_folds x col_folds`` folds streaming ``m`` rows, in order."""
        return [self.read(f, s) for _ in range(col_folds) for f in range(row_folds) for s in range(m)]


#: ``WINDOW`` commands made, by window (:meth:`ConvWindow.command`); a command is immutable.
_COMMANDS: dict[ConvWindow, Command] = {}
_COMMANDS_SIZE = 1 << 14
