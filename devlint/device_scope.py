"""The device already in scope: what an autofix writes instead of a literal ``"cuda"``.

A fix that replaces ``"cuda"`` by another literal only moves the finding (DEV206 becomes
DEV101); one that names the device the code already chose removes it. :class:`DeviceScope`
follows the traversal and records, in source order, the device expressions visible at each
point:

* a local or module-level name bound to a device (``device``, ``dev``, ``DEVICE``,
  ``*_device``) by ``torch.device(...)``, ``x.device``, a device string or a conditional
  choice of device strings; a name spelled exactly ``device``/``DEVICE`` counts whatever it
  is bound to, and so does a parameter of that name (unless its default is ``None``);
* ``self.device`` in a method of a class that assigns ``self.device`` or derives from a
  class that has one (Lightning's ``LightningModule``, transformers' ``PreTrainedModel``);
* ``args.device`` where ``args``/``opt``/``cfg`` is visible and the file declares a
  ``--device`` option;
* ``x.device`` of the first input of a ``forward`` method.

A binding counts from the statement after it (``device = torch.device("cuda")`` is not a
device in scope for its own literal). Nothing is inferred across files.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import libcst as cst

from .devices import literal_device
from .guards import string_value
from .names import dotted
from .rule import Analysis

#: Names that hold a device when bound to something that looks like one.
_DEVICE_NAME = re.compile(r"^(device|dev|_device|DEVICE|DEV|[a-z_]+_device|[A-Z_]+_DEVICE)$")
#: Names trusted to hold a device whatever they are bound to.
_ALWAYS = {"device", "DEVICE", "_device"}
_ARGS = ("args", "opt", "opts", "cfg", "config", "hparams", "options", "flags")
_SELF_DEVICE_BASES = re.compile(r"(LightningModule|PreTrainedModel|ModelMixin|DiffusionPipeline)$")
_DEVICE_OPTION = re.compile(r"""add_argument\(\s*["']--device["']""")


class Device(NamedTuple):
    """A device expression in scope. ``kind`` says what it holds: ``"device"`` (a
    ``torch.device``), ``"type"`` (a device-type string with no index: ``"cuda"``/``"cpu"``),
    or ``"any"`` (unknown: a string, an int or a ``torch.device``)."""

    expr: str
    kind: str

    def as_device(self) -> str:
        """Code for the device (``.to(...)``, ``device=``, ``map_location=``)."""
        return self.expr

    def as_type(self, torch: str | None) -> str | None:
        """Code for the device *type* (``torch.autocast(...)``, ``device_type=``):
        ``device.type``, the name itself for a type string, else ``torch.device(x).type``
        (``None`` when torch is not imported under any name)."""
        if self.kind == "device":
            return f"{self.expr}.type"
        if self.kind == "type":
            return self.expr
        return f"{torch}.device({self.expr}).type" if torch else None


def _kind(value: cst.BaseExpression | None, ctx) -> str | None:
    """What a bound value holds as a device, or ``None`` if it does not look like one."""
    if value is None:
        return None
    if value.__class__ is cst.IfExp:
        kinds = {_kind(value.body, ctx), _kind(value.orelse, ctx)}
        return kinds.pop() if len(kinds) == 1 else ("any" if None not in kinds else None)
    text = string_value(value)
    if text is not None:
        if text in ("cpu", "cuda", "mps", "xpu"):
            return "type"
        return "any" if literal_device(value) is not None or text.startswith("cpu") else None
    if value.__class__ is cst.Call:
        name = ctx.resolve(value.func) or ""
        if name in ("torch.device", "torch.accelerator.current_accelerator"):
            return "device"
        return None
    if value.__class__ is cst.Attribute and value.attr.value == "device":
        return "device"
    return None


class DeviceScope(Analysis):
    """Device expressions visible at the current point of the traversal (module docstring)."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        #: one dict per module/function scope: name -> kind
        self._frames: list[dict[str, str]] = [{}]
        #: per enclosing class: does ``self.device`` exist?
        self._classes: list[bool] = []
        #: per function: (is a method, first input of a forward method or None)
        self._functions: list[tuple[bool, str | None]] = []
        self._assigning: list[set[str]] = []
        self._kinds: list[str] = []  # "class"/"function" of the enclosing definitions
        self._device_option = bool(_DEVICE_OPTION.search(ctx.text))

    # -- scopes -------------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        inherited = any(_SELF_DEVICE_BASES.search(dotted(b.value) or "") for b in node.bases)
        self._classes.append(inherited)
        self._kinds.append("class")

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.pop()
        self._kinds.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        method = bool(self._kinds) and self._kinds[-1] == "class"
        self._kinds.append("function")
        frame: dict[str, str] = {}
        params = [*node.params.posonly_params, *node.params.params]
        first_input = None
        if method and node.name.value == "forward" and len(params) > 1 and params[1].default is None:
            first_input = params[1].name.value
        for param in (*params, *node.params.kwonly_params):
            name = param.name.value
            if not _DEVICE_NAME.match(name) or dotted(param.default) == "None":
                continue
            annotation = dotted(param.annotation.annotation) if param.annotation else None
            kind = _kind(param.default, self.ctx) if param.default is not None else None
            if annotation in ("torch.device", "device"):
                kind = "device"
            if kind is None and name in _ALWAYS | {"dev"}:
                kind = "any"
            if kind is not None:
                frame[name] = kind
        for param in params:
            if param.name.value in _ARGS:
                frame[param.name.value] = "args"
        self._frames.append(frame)
        self._functions.append((method, first_input))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.pop()
        self._functions.pop()
        self._kinds.pop()

    # -- bindings (counted once the statement is complete) ------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        self._assigning.append({n for n in (dotted(t.target) for t in node.targets) if n})

    def leave_Assign(self, node: cst.Assign) -> None:
        self._assigning.pop()
        for target in node.targets:
            self._bind(dotted(target.target), node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assigning.append({dotted(node.target) or ""})

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assigning.pop()
        if node.value is not None:
            self._bind(dotted(node.target), node.value)

    def _bind(self, name: str | None, value: cst.BaseExpression) -> None:
        if not name:
            return
        if name.startswith("self.") and name.count(".") == 1:
            if name == "self.device" and self._classes and dotted(value) != "None":
                self._classes[-1] = True
            return
        if "." in name:
            return
        frame = self._frames[-1]
        if name in _ARGS and value.__class__ is cst.Call and (dotted(value.func) or "").endswith("parse_args"):
            frame[name] = "args"
            return
        if not _DEVICE_NAME.match(name) or dotted(value) == "None":
            return
        kind = _kind(value, self.ctx)
        if kind is None and name in _ALWAYS:
            kind = "any"
        if kind is None:
            return
        before = frame.get(name)
        frame[name] = kind if before in (None, kind) else "any"

    # -- the answer ---------------------------------------------------------------------------
    def device(self) -> Device | None:
        """The best device expression visible here, or ``None``: a device-named local, then
        ``self.device``, then ``args.device``, then a forward input's ``.device``, then a
        module-level device name."""
        assigning = self._assigning[-1] if self._assigning else set()
        local, module = self._frames[-1], self._frames[0]
        frames = [local] if local is module else [local, module]
        found = self._named(local, assigning)
        if found is not None and local is not module:
            return found
        if self._functions and self._functions[-1][0] and self._classes and self._classes[-1] and "self.device" not in assigning:
            return Device("self.device", "device")
        if self._device_option:
            for frame in frames:
                for name, kind in frame.items():
                    if kind == "args":
                        return Device(f"{name}.device", "any")
        if self._functions and self._functions[-1][1]:
            return Device(f"{self._functions[-1][1]}.device", "device")
        return self._named(module, assigning)

    def defining(self) -> bool:
        """Is the statement being visited an assignment to a device-like name?"""
        return bool(self._assigning) and any(_DEVICE_NAME.match(n.rsplit(".", 1)[-1]) for n in self._assigning[-1])

    @staticmethod
    def _named(frame: dict[str, str], assigning: set[str]) -> Device | None:
        order = sorted((n for n, k in frame.items() if k != "args" and n not in assigning),
                       key=lambda n: (n not in _ALWAYS, n != "device", frame[n] != "device", n))
        return Device(order[0], frame[order[0]]) if order else None

    def torch_name(self) -> str | None:
        """The local name torch is imported as (``torch``, ``T``), or ``None``."""
        aliases = self.ctx.names.aliases
        if aliases.get("torch") == "torch":
            return "torch"
        return next((local for local, full in aliases.items() if full == "torch"), None)
