"""Which device types can run here, and why not."""

from __future__ import annotations

import torch

__all__ = ["unavailable"]


def unavailable(device: str) -> str | None:
    """None when the device type ``device`` (``"cpu"``, ``"cuda"``, ``"mps"``) can run here,
    else the reason it cannot, one line."""
    if device == "cpu":
        return None
    if device == "cuda":
        return None if torch.cuda.is_available() else "no CUDA device (torch.cuda.is_available() is False)"
    if device == "mps":
        mps = getattr(torch.backends, "mps", None)
        ok = mps is not None and mps.is_available()
        return None if ok else "no MPS device (torch.backends.mps.is_available() is False)"
    return f"unknown device {device!r}"
