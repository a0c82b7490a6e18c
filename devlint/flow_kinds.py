"""The kinds of values the device dataflow (:mod:`devlint.dataflow`) tracks, and :class:`V`.

See :mod:`devlint.dataflow` for what each kind means; a value of no known kind is ``None``.
"""

from __future__ import annotations

CPU, DEV, CPUB, DEVB, LOADER, MODEL, INP, CPUDEV = "cpu", "dev", "cpub", "devb", "loader", "model", "inp", "cpudev"
PARAM, PB, PITEM, ENUM, ZIP = "param", "pbatch", "pitem", "enum", "zip"
#: a tuple of DataLoaders returned by a project helper (``train, val = build_loaders(cfg)``)
LOADERS = "loaders"
#: a container of a partly moved batch (moved items and one left behind), and the output of a
#: call given an input left behind (:mod:`devlint.partial_batches`)
MIXB, FED = "mixb", "fed"
#: kinds that only mean something in the frame that made them (never stored on ``self``)
_LOCAL_KINDS = frozenset({PARAM, PB, PITEM, ENUM, ZIP, MIXB, FED})
TENSORS = (CPU, DEV, INP)


class V:
    """A value's kind; ``origins`` are the factory calls a CPU tensor comes from; ``module``
    marks a module (as opposed to a tensor); ``explicit`` a tensor placed by ``.cpu()``."""

    __slots__ = ("kind", "origins", "module", "loss", "explicit", "group", "param")

    def __init__(
        self, kind: str, origins: tuple = (), module: bool = False, loss: bool = False, explicit: bool = False,
        group: int | None = None, param: tuple[str, str] | None = None,
    ) -> None:
        self.kind, self.origins, self.module, self.loss, self.explicit = kind, origins, module, loss, explicit
        #: ``group``: the batch a PB/PITEM (or a DEV moved from one) belongs to; ``param``:
        #: ``(function, parameter)`` a PARAM is, or that a PB/PITEM was iterated from
        self.group, self.param = group, param

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"V({self.kind}{', module' if self.module else ''}{', loss' if self.loss else ''})"
