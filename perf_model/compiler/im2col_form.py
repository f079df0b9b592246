"""The im2col form: a conv as a 1x1 conv over its windows, written by the host as channels.

Output pixel ``(oy, ox)`` of a conv reads input pixels ``(sh * oy - ph + ky * dh, sw * ox - pw + kx
* dw)`` for ``ky < kh``, ``kx < kw``. Write every window of the (padded) input as one pixel of
``kh * kw * c_in`` channels:
``x'[n, oy, ox, (ky * kw + kx) * c_in + c] = x_pad[n, sh * oy + ky * dh, sw * ox + kx * dw, c]``.
The same outputs are then a 1x1 conv over ``x'`` (``out_h x out_w`` pixels, stride 1, no padding)
with weights ``w'[0, 0, (ky * kw + kx) * c_in + c, o] = w[ky, kx, c, o]``: every product once, in
the order of the taps (the integer outputs are identical).

It is the host's im2col GEMM run as a conv program, so it can sit in a network's one program:
the network's input is the host's to write (``conv_network``'s ``input_form``), and where the
per-op plans run a network's first conv as the host's im2col GEMM (ResNet's 7x7/2 stem on 3
channels on a small array: 147 channels fill the rows, where the conv as it is fills 3 of them),
the one program runs this form. Its bytes cross DRAM as the GEMM's ``A`` does (each input pixel
written up to ``kh * kw / (sh * sw)`` times). Only dense convs (``groups == 1``) whose windows
are more than their pixels (a kernel of more than one tap, or a stride) are turned into it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from workloads.ops import Conv2d

__all__ = ["im2col_conv", "im2col_input", "im2col_weights", "im2col_form"]


def im2col_conv(conv: Conv2d) -> Conv2d | None:
    """The 1x1 conv over ``conv``'s windows as channels (module docstring), or ``None`` when
    ``conv`` is grouped or already a 1x1 stride-1 conv without padding."""
    if conv.groups != 1 or (conv.kh, conv.kw, conv.stride_h, conv.stride_w) == (1, 1, 1, 1) and not (
            conv.pad_h or conv.pad_w or conv.pad_h_hi or conv.pad_w_hi):
        return None
    return dataclasses.replace(conv, h=conv.out_h, w=conv.out_w, c_in=conv.c_in * conv.kh * conv.kw, kh=1, kw=1,
                               stride_h=1, stride_w=1, pad_h=0, pad_w=0, pad_h_hi=0, pad_w_hi=0, dilation_h=1,
                               dilation_w=1)


def im2col_form(conv: Conv2d) -> str:
    """How :func:`im2col_conv` reshapes ``conv``, in words (for notes)."""
    new = im2col_conv(conv)
    if new is None:
        return ""
    return f"im2col: {new.c_in}-channel windows on {new.h}x{new.w}, a 1x1 kernel"


def im2col_input(x: np.ndarray, conv: Conv2d) -> np.ndarray:
    """``conv``'s NHWC input ``x`` as its windows (module docstring)."""
    n, h, w, c = x.shape
    hi_h, hi_w = int(conv.pad_h_hi or 0), int(conv.pad_w_hi or 0)
    padded = np.zeros((n, conv.pad_h + h + hi_h, conv.pad_w + w + hi_w, c), dtype=x.dtype)
    padded[:, conv.pad_h:conv.pad_h + h, conv.pad_w:conv.pad_w + w] = x
    rows = conv.stride_h * np.arange(conv.out_h)[:, None] + conv.dilation_h * np.arange(conv.kh)[None, :]
    cols = conv.stride_w * np.arange(conv.out_w)[:, None] + conv.dilation_w * np.arange(conv.kw)[None, :]
    # (n, out_h, kh, out_w, kw, c) -> (n, out_h, out_w, kh, kw, c)
    windows = padded[:, rows[:, :, None, None], cols[None, None, :, :]]
    return np.ascontiguousarray(windows.transpose(0, 1, 3, 2, 4, 5).reshape(
        n, conv.out_h, conv.out_w, conv.kh * conv.kw * c))


def im2col_weights(w: np.ndarray, conv: Conv2d) -> np.ndarray:
    """``conv``'s HWIO weights ``w`` as those of :func:`im2col_conv`."""
    kh, kw, c, o = np.asarray(w).shape
    return np.ascontiguousarray(np.asarray(w).reshape(1, 1, kh * kw * c, o))
