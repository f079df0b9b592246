"""Space-to-depth: a strided convolution as an equivalent stride-1 one on a reshaped input.

A conv of stride ``(sh, sw)`` reads, for output row ``oy``, input rows ``sh * oy - ph + ky``.
Cut the input into blocks of ``sh x sw`` pixels and stack each block's pixels as channels:
``x'[n, Y, X, (dy * sw + dx) * c_in + c] = x[n, sh * Y + dy, sw * X + dx, c]`` (rows and columns
past the input's end are zeros, so the last block is whole). The same outputs are then a conv of
stride 1 over ``x'`` with

* ``c_in' = sh * sw * c_in`` channels;
* ``kh' = floor((kh - 1 - ph) / sh) + ceil(ph / sh) + 1`` kernel rows (the blocks a window
  touches), top padding ``ph' = ceil(ph / sh)`` and the bottom padding that keeps ``out_h``
  (likewise for columns);
* weights ``w'[ky', kx', (dy * sw + dx) * c_in + c, o] = w[ky, kx, c, o]`` with ``ky = sh * (ky' -
  ph') + dy + ph`` (and ``kx`` alike), zero where ``ky`` or ``kx`` falls outside the kernel.

Every product of the original conv appears once, the others multiply a zero weight, so the
integer outputs are identical (the output stage sees the same accumulators). The reshape moves
no byte twice: ``x'`` is ``x`` in another order (plus the zeros that complete the last block).
It is what the host does once to an image it already lays out for the accelerator, the way TPU
ResNet-50 submissions to MLPerf fed their first layer.

Why it pays: a first layer has few channels (ResNet's 3 on 224 x 224, stride 2, 7 x 7). One tap
a word uses 3 of an array's rows; tap packing (``conv_pack``) packs a kernel row's taps but
never its rows. After space-to-depth by ``2 x 2`` the conv has 12 channels, a 4 x 4 kernel and
stride 1: a quarter of the output pixels' row folds, and no stride for the window to skip over.
The model scores both forms and keeps the faster (``conv_score.conv_figures``); the simulator
runs the form it kept on the reshaped input and checks the output against the original conv.

Only dense convs (``groups == 1``) without dilation, with a stride above 1 and a kernel larger
than the stride in one axis, are reshaped.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from workloads.ops import Conv2d

__all__ = ["s2d_conv", "s2d_input", "s2d_weights", "s2d_form"]


def _axis(k: int, s: int, pad: int, size: int, out: int) -> tuple[int, int, int, int]:
    """``(blocks, kernel, pad, pad_hi)`` of one axis after space-to-depth."""
    top = -(-pad // s)
    kernel = (k - 1 - pad) // s + top + 1
    blocks = -(-size // s)
    return blocks, kernel, top, out + kernel - 1 - blocks - top


def s2d_conv(conv: Conv2d) -> Conv2d | None:
    """The stride-1 conv over ``conv``'s space-to-depth input (module docstring), or ``None`` when
    ``conv`` is not reshaped (grouped, dilated, stride 1, a kernel no larger than the stride, or a
    bottom padding that would have to be negative)."""
    sh, sw = conv.stride_h, conv.stride_w
    if conv.groups != 1 or conv.dilation_h != 1 or conv.dilation_w != 1 or sh * sw == 1:
        return None
    if conv.kh <= sh and conv.kw <= sw:
        return None
    h, kh, ph, ph_hi = _axis(conv.kh, sh, conv.pad_h, conv.h, conv.out_h)
    w, kw, pw, pw_hi = _axis(conv.kw, sw, conv.pad_w, conv.w, conv.out_w)
    if ph_hi < 0 or pw_hi < 0:
        return None
    return dataclasses.replace(conv, h=h, w=w, c_in=conv.c_in * sh * sw, kh=kh, kw=kw, stride_h=1, stride_w=1,
                               pad_h=ph, pad_w=pw, pad_h_hi=ph_hi, pad_w_hi=pw_hi)


def s2d_form(conv: Conv2d) -> str:
    """How :func:`s2d_conv` reshapes ``conv``, in words (for notes)."""
    new = s2d_conv(conv)
    if new is None:
        return ""
    return (f"space-to-depth {conv.stride_h}x{conv.stride_w}: {new.c_in} channels on {new.h}x{new.w}, "
            f"a {new.kh}x{new.kw} kernel of stride 1")


def s2d_input(x: np.ndarray, conv: Conv2d) -> np.ndarray:
    """``conv``'s NHWC input ``x`` after space-to-depth (module docstring)."""
    sh, sw = conv.stride_h, conv.stride_w
    n, h, w, c = x.shape
    hb, wb = -(-h // sh), -(-w // sw)
    full = np.zeros((n, hb * sh, wb * sw, c), dtype=x.dtype)
    full[:, :h, :w] = x
    blocks = full.reshape(n, hb, sh, wb, sw, c).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(blocks.reshape(n, hb, wb, sh * sw * c))


def s2d_weights(w: np.ndarray, conv: Conv2d) -> np.ndarray:
    """``conv``'s HWIO weights ``w`` as those of :func:`s2d_conv` (module docstring)."""
    new = s2d_conv(conv)
    if new is None:
        raise ValueError(f"conv {conv.name or conv} is not reshaped by space-to-depth")
    sh, sw, c = conv.stride_h, conv.stride_w, conv.c_in
    out = np.zeros((new.kh, new.kw, new.c_in, conv.c_out), dtype=w.dtype)
    for ky2 in range(new.kh):
        for dy in range(sh):
            ky = sh * (ky2 - new.pad_h) + dy + conv.pad_h
            if not 0 <= ky < conv.kh:
                continue
            for kx2 in range(new.kw):
                for dx in range(sw):
                    kx = sw * (kx2 - new.pad_w) + dx + conv.pad_w
                    if 0 <= kx < conv.kw:
                        lane = (dy * sw + dx) * c
                        out[ky2, kx2, lane:lane + c] = w[ky, kx]
    return out
