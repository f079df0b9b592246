"""Row stacking: a conv as an equivalent one-row-kernel conv over its input rows stacked as channels.

Output row ``oy`` of a conv reads input rows ``sh * oy - ph + ky * dh`` for ``ky < kh``. Stack
those ``kh`` rows of the (vertically padded) input as channels, one output row's worth per row:
``x'[n, oy, x, ky * c_in + c] = x_pad[n, sh * oy + ky * dh, x, c]``. The same outputs are then a
conv over ``x'`` with

* ``out_h`` input rows, ``c_in' = kh * c_in`` channels;
* a ``1 x kw`` kernel, vertical stride 1, no vertical padding or dilation (the pads are in
  ``x'`` as zeros); the horizontal stride, padding and dilation unchanged;
* weights ``w'[0, kx, ky * c_in + c, o] = w[ky, kx, c, o]``.

Every product once, in the same order of taps within a row: the integer outputs are identical.

It is the vertical half of im2col, made by the host: each input row is written up to ``kh / sh``
times, and those bytes cross DRAM (the model counts the transfers of ``x'``). It pays on an input
of very few channels, a network's image, whose pixels fill a small part of an ifmap word and of a
DRAM beat: ResNet's stem after space-to-depth has 12-channel pixels (a 64-byte beat carries 12
bytes) and a 4 x 4 kernel whose rows take 4 row folds an output pixel with tap packing
(``conv_pack`` packs a kernel row's taps, never its rows). Stacked, a pixel is 48 channels in the
same beat and the whole window is one row fold: a quarter of the runs, and no halo rows. The model
scores the forms (``conv_forms``) and keeps the fastest.

Only dense convs (``groups == 1``) with a kernel of more than one row are stacked.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from workloads.ops import Conv2d

__all__ = ["stack_conv", "stack_input", "stack_weights", "stack_form"]


def stack_conv(conv: Conv2d) -> Conv2d | None:
    """The one-row-kernel conv over ``conv``'s row-stacked input (module docstring), or ``None``
    when ``conv`` is grouped or has a one-row kernel."""
    if conv.groups != 1 or conv.kh == 1:
        return None
    return dataclasses.replace(conv, h=conv.out_h, c_in=conv.c_in * conv.kh, kh=1, stride_h=1, pad_h=0,
                               pad_h_hi=0, dilation_h=1)


def stack_form(conv: Conv2d) -> str:
    """How :func:`stack_conv` reshapes ``conv``, in words (for notes)."""
    new = stack_conv(conv)
    if new is None:
        return ""
    return f"{conv.kh} rows stacked: {new.c_in} channels on {new.h}x{new.w}, a 1x{new.kw} kernel"


def stack_input(x: np.ndarray, conv: Conv2d) -> np.ndarray:
    """``conv``'s NHWC input ``x`` with its rows stacked (module docstring)."""
    n, h, w, c = x.shape
    padded = np.zeros((n, conv.pad_h + h + int(conv.pad_h_hi or 0), w, c), dtype=x.dtype)
    padded[:, conv.pad_h:conv.pad_h + h] = x
    rows = conv.stride_h * np.arange(conv.out_h)[:, None] + conv.dilation_h * np.arange(conv.kh)[None, :]
    stacked = padded[:, rows]  # (n, out_h, kh, w, c)
    return np.ascontiguousarray(stacked.transpose(0, 1, 3, 2, 4).reshape(n, conv.out_h, w, conv.kh * c))


def stack_weights(w: np.ndarray, conv: Conv2d) -> np.ndarray:
    """``conv``'s HWIO weights ``w`` as those of :func:`stack_conv`."""
    kh, kw, c, o = np.asarray(w).shape
    return np.ascontiguousarray(np.asarray(w).transpose(1, 0, 2, 3).reshape(1, kw, kh * c, o))
