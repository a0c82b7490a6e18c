"""The scopes the device dataflow keeps: a :class:`Frame` per module or function body, and a
:class:`ClassInfo` per class body (its ``self.`` attributes, seen by its later methods).

Built and walked by :class:`devlint.dataflow.DeviceFlow`.
"""

from __future__ import annotations

import libcst as cst

from .flow_kinds import V


class ClassInfo:
    """What a class body tells: its ``self.`` attributes, methods, and what it derives from."""

    __slots__ = ("name", "attrs", "methods", "is_module", "silent", "param_attrs", "torch_modules", "node", "scalar_attrs", "weighted_layers")

    def __init__(self, node: cst.ClassDef, is_module: bool, silent: bool) -> None:
        self.node, self.name = node, node.name.value
        self.attrs: dict[str, V | None] = {}
        self.methods = {s.name.value for s in node.body.body if s.__class__ is cst.FunctionDef} if node.body.__class__ is cst.IndentedBlock else set()
        self.is_module, self.silent = is_module, silent
        self.param_attrs: set[str] = set()
        #: attributes holding a ``torch.nn`` layer (which does not move its inputs itself)
        self.torch_modules: set[str] = set()  # (not a CTC loss: it takes its lengths on the CPU)
        #: those of them that hold weights (``nn.LSTM``, ``nn.Linear``; not ``nn.ReLU``)
        self.weighted_layers: set[str] = set()
        #: attributes holding a number (``self.p = 0.1``, ``self.p = p`` with ``p=0.1`` a parameter's
        #: default): a scalar operand, as a literal is
        self.scalar_attrs: set[str] = set()


class Frame:
    """A module body or a function body."""

    __slots__ = ("vars", "parent", "cls", "self_name", "node", "name", "returns", "moved", "silent", "forward", "kind", "moved_groups", "params", "rebound", "owner")

    def __init__(self, kind: str, node, parent: "Frame | None", cls: ClassInfo | None, self_name: str | None) -> None:
        self.kind, self.node, self.parent, self.cls, self.self_name = kind, node, parent, cls, self_name
        self.name = getattr(getattr(node, "name", None), "value", "<module>")
        self.vars: dict[str, V | None] = {}
        self.returns: list[V | None] = []
        self.moved = False
        #: batch groups some item of which was moved to a device in this frame
        self.moved_groups: set[int] = set()
        self.silent = bool(parent and parent.silent) or bool(cls and cls.silent)
        self.forward = bool(cls and cls.is_module and self.name == "forward" and self_name)
        #: parameters that may be items of one batch handed to a step function
        #: (``def train_step(self, x, y)``: group ``id(node)``), and the names rebound since
        self.params: set[str] = set()
        self.rebound: set[str] = set()
        #: the first parameter of a classmethod (``cls``): the class, whose call builds an instance
        self.owner: str | None = None
