"""Settings the rules read that are not a selection: the oldest torch the code supports.

Set by the CLI from ``--torch-version`` or ``torch-version`` in ``[tool.devlint]``, and carried
to worker processes (and the cache key) through the ``DEVLINT_TORCH_VERSION`` environment
variable. ``None`` makes no assumption about the torch version (fixes and messages then use
APIs every supported torch has: ``torch.cuda.is_available()``).
"""

from __future__ import annotations

import os

ENV = "DEVLINT_TORCH_VERSION"
#: The first torch with ``torch.accelerator`` (``current_accelerator()``, ``is_available()``).
ACCELERATOR_API = (2, 6)


def torch_version() -> tuple[int, int] | None:
    """(major, minor) of the oldest torch to support, or ``None``."""
    value = os.environ.get(ENV, "")
    try:
        major, minor = value.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def set_torch_version(version: tuple[int, int] | None) -> None:
    """Set (or with ``None`` clear) the oldest torch to support, for this process and the
    processes it starts."""
    if version is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = f"{version[0]}.{version[1]}"


def has_accelerator_api() -> bool:
    """May fixes and messages use ``torch.accelerator``?"""
    version = torch_version()
    return version is not None and version >= ACCELERATOR_API
