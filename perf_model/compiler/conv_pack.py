"""Tap packing: ``T`` taps of a kernel row in one ifmap word (the layout, its reference walk).

A conv with fewer input channels than the array has rows fills only ``c_in`` of a word's ``R``
lanes, so a run's ``K`` is a tap's ``c_in`` channels and the array's other rows multiply zeros
(tpu-v1's 64-channel layers use a quarter of its 256 rows). Packed, a word holds ``T`` pixels of
one input row side by side: lane group ``t`` (``L = R / T`` lanes) of the word of pixel ``ix``
holds pixel ``ix + t``; a row-fold then serves ``T`` taps ``(ky, kx .. kx + T - 1)`` (a group),
so a 3x3 conv of 64 channels on 256 rows streams 3 row-folds an output pixel instead of 9.

How the words are made: the DMA's sliding load (``rtl_gen.soc.dma``, a ``LOAD`` with ``slide``)
reads each pixel once, as a narrow word of ``L`` lanes (``beats`` AXI beats), and shifts every
beat it receives into its word register, oldest beat out; each word it writes is the last
``max_beats`` beats received, i.e. pixels ``q - T + 1 .. q`` when pixel ``q`` completes (``T =
max_beats / beats``), written at buffer word ``q`` of the band. So the group that starts at pixel
``ix`` of band row ``iy`` is word ``iy * in_w + ix + T - 1``; the window's ``origin`` carries the
``T - 1`` (``perf_model.compiler.conv_window``). Groups that run past a row's end hold the next
row's first pixels, groups before its start the previous row's last (or, on the band's first
row, whatever the register held): the address generator keeps only the lane groups whose pixel
``ix + t`` lies in the row (``groups``, ``rtl_gen.core.conv_addr``), the others are zero like a pad
(the core masks them). The band ends with ``T - 1`` extra words so its last row's groups exist.

The weights match: the row-fold of group ``(ky, g)`` has, at lane ``t * L + c``, the weight of tap
``(ky, g * T + t)`` and channel ``c`` (zero past the kernel's width or the channels).

Only narrow pixels (one word a pixel, ``c_in <= R / 2``), one group (``groups == 1``) and
``dilation_w == 1`` are packed; others keep one tap a word.
"""

from __future__ import annotations

import numpy as np

from perf_model.compiler.conv_window import ConvWindow

__all__ = ["slide", "packed_weights", "packed_window", "packed_conv"]


def slide(pixels: np.ndarray, taps: int, prior: np.ndarray | None = None) -> np.ndarray:
    """The words a sliding load writes: word ``q`` is pixels ``q - taps + 1 .. q`` side by side.

    Args:
        pixels: ``(n, L)``, each pixel's ``L`` lanes as they arrive.
        taps: ``T``.
        prior: ``(taps - 1, L)``, the pixels the register held before the first (default zeros).

    Returns:
        ``(n, taps * L)`` words.
    """
    p = np.asarray(pixels)
    head = np.zeros((taps - 1, p.shape[1]), p.dtype) if prior is None else np.asarray(prior, p.dtype)
    stream = np.concatenate([head, p])
    return np.concatenate([stream[t:t + len(p)] for t in range(taps)], axis=1)


def packed_weights(weights: np.ndarray, taps: int, lanes: int, rows: int) -> np.ndarray:
    """The weight rows of each row-fold of a packed conv, ``(kh * groups, rows, c_out)``.

    ``weights``: HWIO, ``c_in <= lanes``; fold ``ky * groups + g`` has at row ``t * lanes + c`` the
    weight of tap ``(ky, g * taps + t)``, channel ``c``; zero elsewhere.
    """
    w = np.asarray(weights)
    kh, kw, c_in, c_out = w.shape
    groups = -(-kw // taps)
    out = np.zeros((kh * groups, rows, c_out), w.dtype)
    for ky in range(kh):
        for g in range(groups):
            for t in range(taps):
                kx = g * taps + t
                if kx < kw:
                    out[ky * groups + g, t * lanes:t * lanes + c_in] = w[ky, kx]
    return out


def packed_window(*, in_h: int, in_w: int, out_w: int, kw: int, stride: tuple[int, int], dilation_h: int,
                  pad: tuple[int, int], taps: int) -> ConvWindow:
    """The window of a packed run over a band of ``in_h`` rows (``pad``: top, left)."""
    return ConvWindow(in_w=in_w, in_h=in_h, out_w=out_w, stride_h=stride[0], stride_w=stride[1],
                      dilation_h=dilation_h, dilation_w=taps, kw=-(-kw // taps), pad_top=pad[0], pad_left=pad[1],
                      cw=1, cblocks=1, pack=taps.bit_length() - 1)


def packed_conv(x: np.ndarray, weights: np.ndarray, *, stride: tuple[int, int], pad: tuple[int, int],
                out_hw: tuple[int, int], dilation_h: int, taps: int, lanes: int, rows: int,
                prior: np.ndarray | None = None, tail: np.ndarray | None = None,
                origin_shift: int = 0) -> np.ndarray:
    """One image's conv computed the way the array sees a packed conv (the reference of the layout).

    ``x``: HWC (``c_in <= lanes``); the band is the whole image, its pixels loaded by :func:`slide`
    (``prior``: what the register held; ``tail``: the ``taps - 1`` pixels read past the band),
    each fold's word read by :meth:`ConvWindow.read` and masked by :meth:`ConvWindow.groups`.
    ``origin_shift`` moves every read by that many words (tests: a wrong offset must fail).

    Returns:
        ``(out_h, out_w, c_out)`` int64 sums.
    """
    h, w_in, c_in = x.shape
    out_h, out_w = out_hw
    px = np.zeros((h * w_in, lanes), np.int64)
    px[:, :c_in] = x.reshape(h * w_in, c_in)
    tl = np.zeros((taps - 1, lanes), np.int64) if tail is None else np.asarray(tail, np.int64)
    band = slide(np.concatenate([px, tl]), taps, prior)
    band = np.pad(band, ((0, 0), (0, rows - taps * lanes)))
    wts = packed_weights(weights, taps, lanes, rows).astype(np.int64)
    win = packed_window(in_h=h, in_w=w_in, out_w=out_w, kw=weights.shape[1], stride=stride,
                        dilation_h=dilation_h, pad=pad, taps=taps)
    out = np.zeros((out_h * out_w, weights.shape[3]), np.int64)
    for f in range(len(wts)):
        for s in range(out_h * out_w):
            word = win.read(f, s)
            if word is None:
                continue
            keep = win.groups(f, s)
            mask = np.repeat([(keep >> t) & 1 for t in range(taps)], lanes)
            a = band[min(max(word + origin_shift, 0), len(band) - 1)].copy()
            a[:taps * lanes] *= mask
            out[s] += a @ wts[f]
    return out.reshape(out_h, out_w, -1)
