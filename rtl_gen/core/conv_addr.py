"""The convolution address generator: the ifmap word of each streamed row of a window run.

A weight-stationary run with ``window`` set (``accel_spec.isa``, ``WINDOW``) streams its
``A`` from an NHWC input band instead of packed rows. This unit follows the controller's fold
cursor and stream and gives, for every x read, the word address (relative to the run's
``x_base``, two's complement) and whether the read is a pad (no read; the lanes are zero).
Reference: ``perf_model.compiler.conv_window.ConvWindow.read``.

Strobes from the controller (all sampled at a clock edge):

* ``start``: a run starts; the window fields on the ports are latched and the cursor is put on
  row-fold 0 (tap ``(0, 0)``, channel word 0).
* ``latch``: the cursor's fold becomes the streaming fold; the stream is put on output pixel 0.
* ``advance`` (with ``wrap``): the cursor moves to the next row-fold, or back to row-fold 0 when
  ``wrap`` (the last row-fold of a column-fold). ``latch`` takes the cursor before the move.
* ``step``: the stream moves to the next output pixel (``latch`` wins).

Only adders, counters and comparators: the cursor keeps ``(cb, kx)``, the first input pixel of
its tap ``(iy0, ix0)`` and the word of its tap; the stream keeps ``ox``, ``(iy, ix)`` and the
words of the pixel and of its output row's first pixel, and with a nonzero ``image_rows`` (several
images in one run) the output row within the image, ``iy`` going back to the fold's first row at
each image while the words run on (the images' bands lie one after the other).

Tap packing (``pack``, ``perf_model.compiler.conv_pack``): ``groups`` has a bit per lane group
(``max_groups`` of them, a parameter: 1 builds the unpacked generator, one check), group ``t``
kept when its pixel ``ix + t`` is inside the row (``t`` below ``T = 2 ** pack``); ``pad`` when none
is. The addresses need nothing new: the compiler puts the packed word's offset in ``origin``.
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel_spec.errors import ConfigError
from accel_spec.isa import FIELDS, SIGNED_WINDOW_FIELDS, WINDOW_FIELDS

__all__ = ["ConvAddressGenerator", "ADDR_BITS", "COORD_BITS"]

#: Width of the signed word addresses the generator keeps.
ADDR_BITS = 40
#: Width of the signed pixel coordinates it keeps.
COORD_BITS = 24


class ConvAddressGenerator(wiring.Component):
    """See the module docstring. Ports: one input per ``WINDOW`` field (``origin`` signed),
    ``start``, ``latch``, ``advance``, ``wrap``, ``step``; outputs ``addr`` (signed), ``pad`` and
    ``groups`` (``max_groups`` bits: the lane groups kept, a power of two up to ``2 ** 15``) and
    ``pack_run`` (the ``pack`` latched with ``start``)."""

    def __init__(self, *, max_groups: int = 1) -> None:
        if max_groups < 1 or max_groups & (max_groups - 1) or max_groups > 1 << ((1 << FIELDS["pack"][1]) - 1):
            raise ConfigError(f"max_groups must be a power of two up to 2 ** 15, not {max_groups}")
        self.max_groups = max_groups
        ports = {name: In(signed(FIELDS[name][1]) if name in SIGNED_WINDOW_FIELDS else FIELDS[name][1])
                 for name in WINDOW_FIELDS}
        super().__init__({
            **ports, "start": In(1), "latch": In(1), "advance": In(1), "wrap": In(1), "step": In(1),
            "addr": Out(signed(ADDR_BITS)), "pad": Out(1), "groups": Out(max_groups),
            "pack_run": Out(FIELDS["pack"][1]),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        f = {name: Signal.like(getattr(self, name), name=f"w_{name}") for name in WINDOW_FIELDS}
        with m.If(self.start):
            m.d.sync += [f[name].eq(getattr(self, name)) for name in WINDOW_FIELDS]

        def coord() -> Signal:
            return Signal(signed(COORD_BITS))

        def word() -> Signal:
            return Signal(signed(ADDR_BITS))

        # The cursor (the next fold to stream).
        cb = Signal(FIELDS["cblocks"][1])
        kx = Signal(FIELDS["kw"][1])
        iy0, ix0 = coord(), coord()
        row_word, tap_word = word(), word()

        def home(src: dict[str, Signal]) -> list:
            """The cursor on row-fold 0 from the fields ``src``."""
            return [cb.eq(0), kx.eq(0), iy0.eq(-src["pad_top"]), ix0.eq(-src["pad_left"]),
                    row_word.eq(src["origin"]), tap_word.eq(src["origin"])]

        ports = {name: getattr(self, name) for name in WINDOW_FIELDS}
        with m.If(self.start):
            m.d.sync += home(ports)
        with m.Elif(self.advance):
            with m.If(self.wrap):
                m.d.sync += home(f)
            with m.Elif(cb + 1 != f["cblocks"]):
                m.d.sync += cb.eq(cb + 1)
            with m.Elif(kx + 1 != f["kw"]):
                m.d.sync += [cb.eq(0), kx.eq(kx + 1), ix0.eq(ix0 + f["dilation_w"]),
                             tap_word.eq(tap_word + f["kx_step"])]
            with m.Else():
                m.d.sync += [cb.eq(0), kx.eq(0), ix0.eq(-f["pad_left"]), iy0.eq(iy0 + f["dilation_h"]),
                             row_word.eq(row_word + f["ky_step"]), tap_word.eq(row_word + f["ky_step"])]

        # The stream (the fold streaming, at its current output pixel).
        ox = Signal(FIELDS["out_w"][1])
        oy = Signal(FIELDS["image_rows"][1])
        iy, ix, ix_first, iy_first = coord(), coord(), coord(), coord()
        px_word, line_word = word(), word()
        with m.If(self.latch):
            m.d.sync += [ox.eq(0), oy.eq(0), iy.eq(iy0), iy_first.eq(iy0), ix.eq(ix0), ix_first.eq(ix0),
                         px_word.eq(tap_word + cb), line_word.eq(tap_word + cb)]
        with m.Elif(self.step):
            with m.If(ox + 1 == f["out_w"]):
                m.d.sync += [ox.eq(0), ix.eq(ix_first),
                             line_word.eq(line_word + f["row_step_w"]), px_word.eq(line_word + f["row_step_w"])]
                with m.If(oy + 1 == f["image_rows"]):  # the next image (never when image_rows is 0)
                    m.d.sync += [oy.eq(0), iy.eq(iy_first)]
                with m.Else():
                    m.d.sync += [oy.eq(oy + 1), iy.eq(iy + f["stride_h"])]
            with m.Else():
                m.d.sync += [ox.eq(ox + 1), ix.eq(ix + f["stride_w"]), px_word.eq(px_word + f["px_step"])]
        row_ok = (iy >= 0) & (iy < f["in_h"])
        if self.max_groups == 1:
            m.d.comb += self.groups.eq(row_ok & (ix >= 0) & (ix < f["in_w"]))
        else:  # group t: pixel ix + t inside the row, t below T = 2 ** pack (group 0 always is)
            inside = [row_ok & (ix >= -t) & (ix < f["in_w"] - t) for t in range(self.max_groups)]
            m.d.comb += self.groups.eq(Cat(inside[0], *(ok & (f["pack"] >= t.bit_length())
                                                        for t, ok in enumerate(inside) if t)))
        m.d.comb += [self.addr.eq(px_word), self.pad.eq(self.groups == 0), self.pack_run.eq(f["pack"])]
        return m
