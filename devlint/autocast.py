"""Autocast regions: which calls open one, and with what device type, dtype and ``enabled``.

Shared by the mixed-precision analysis (:mod:`devlint.amp`) and the rules that read its
regions. The spellings are ``torch.autocast``, ``torch.amp.autocast``, ``torch.cuda.amp.autocast``
and ``torch.cpu.amp.autocast`` (and the bare names imported from those modules); the default
dtypes are those of the PyTorch AMP docs (float16 on CUDA, bfloat16 on the CPU).
"""

from __future__ import annotations

import libcst as cst

from .guards import string_value

_AUTOCAST_MODULES = {
    "torch": None,
    "torch.amp": None,
    "torch.amp.autocast_mode": None,
    "torch.cuda.amp": "cuda",
    "torch.cuda.amp.autocast_mode": "cuda",
    "torch.cpu.amp": "cpu",
    "torch.cpu.amp.autocast_mode": "cpu",
}
#: autocast spelling -> the device type a deprecated API implies (``None``: an argument says).
AUTOCAST = {f"{module}.autocast": device for module, device in _AUTOCAST_MODULES.items()}
_FP16 = {"torch.float16", "torch.half"}
_BF16 = {"torch.bfloat16"}
#: Default autocast dtype by literal device type; other devices count as unknown.
_DEFAULT_DTYPE = {"cuda": "float16", "cpu": "bfloat16"}


class Region:
    """One autocast region: where it was opened, its device type (``"cuda"``, ``"cpu"``...
    or ``None`` for a variable), dtype (``"float16"``, ``"bfloat16"``, another name, or
    ``None`` for unknown), ``enabled`` (``True``, ``False`` for a literal False, or
    ``"expr"``) and whether it is the deprecated ``torch.cuda.amp``/``torch.cpu.amp`` API.
    ``node`` is the autocast call, or the ``with`` item that names a context manager bound to
    one (``with ctx:``)."""

    __slots__ = ("node", "device", "dtype", "enabled", "deprecated", "top", "open_device", "path")

    def __init__(self, node, device, dtype, enabled, deprecated, top=0, open_device=False) -> None:
        self.node, self.device, self.dtype = node, device, dtype
        self.enabled, self.deprecated = enabled, deprecated
        #: no dtype and a device type held in an expression (``device.type``, ``str(device)``)
        self.open_device = open_device
        #: the engine's index of the top-level statement holding the node (see FrameRule)
        self.top = top
        #: the branch path where the region is opened (which arm of which ``if``), as an
        #: event's (:class:`devlint.amp.Event`)
        self.path: tuple = ()

    def opened_at(self, node, top: int, path: tuple, enabled=None) -> "Region":
        """This region as opened again at ``node`` (a ``with ctx:`` item naming it)."""
        region = Region(node, self.device, self.dtype, self.enabled if enabled is None else enabled,
                        self.deprecated, top, self.open_device)
        region.path = path
        return region

    @property
    def active(self) -> bool:
        """False only for a literal ``enabled=False``."""
        return self.enabled is not False

    @property
    def float16(self) -> bool:
        """Does this region compute in float16? An unknown dtype counts as float16 only where
        the device type is a literal ``"cuda"`` or the deprecated CUDA API."""
        if self.dtype is not None:
            return self.dtype == "float16"
        return self.device == "cuda"

    @property
    def maybe_float16(self) -> bool:
        """float16, or possibly so: no dtype and a device type held in an expression
        (``torch.autocast(device_type=device.type)``), which is float16 where it is CUDA."""
        return self.float16 or (self.dtype is None and self.open_device)


def parse_region(expr: cst.BaseExpression, ctx, top: int = 0) -> Region | None:
    """The autocast region this ``with`` item or decorator opens, if any."""
    if expr.__class__ is cst.IfExp:
        for side in (expr.body, expr.orelse):
            found = parse_region(side, ctx, top)
            if found is not None:
                found.enabled = "expr" if found.enabled is True else found.enabled
                return found
        return None
    if expr.__class__ is not cst.Call:
        return None
    name = ctx.resolve(expr.func)
    if name not in AUTOCAST:
        return None
    implied = AUTOCAST[name]
    positional = [a.value for a in expr.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in expr.args if a.keyword is not None}
    if implied is None:  # torch.autocast(device_type, dtype=None, enabled=True, ...)
        order = ("device_type", "dtype", "enabled")
    else:  # torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, ...)
        order = ("enabled", "dtype")
    args = dict(zip(order, positional))
    args.update(keywords)
    if implied is None:
        value = string_value(args.get("device_type"))
        device = value.split(":", 1)[0] if value else None
    else:
        device = implied
    dtype_expr = args.get("dtype")
    if dtype_expr is None:
        dtype = _DEFAULT_DTYPE.get(device) if device else None
    else:
        dtype = dtype_of(dtype_expr, ctx)
    enabled_expr = args.get("enabled")
    if enabled_expr is None or (enabled_expr.__class__ is cst.Name and enabled_expr.value == "True"):
        enabled = True
    elif enabled_expr.__class__ is cst.Name and enabled_expr.value == "False":
        enabled = False
    else:
        enabled = "expr"
    device_expr = args.get("device_type")
    open_device = implied is None and dtype_expr is None and device_expr is not None and string_value(device_expr) is None
    return Region(expr, device, dtype, enabled, implied is not None, top, open_device)


def dtype_of(expr: cst.BaseExpression, ctx) -> str | None:
    """``"float16"``/``"bfloat16"``/another torch dtype name, or ``None`` when unknown."""
    name = ctx.resolve(expr)
    if name in _FP16:
        return "float16"
    if name in _BF16:
        return "bfloat16"
    if name and name.startswith("torch."):
        return name[6:]
    return None


class BoundContext:
    """What a name bound to autocast opens when entered: ``region`` for a context manager
    (``ctx = torch.autocast(...)``, entered as ``with ctx:``), or ``func`` and its leading
    ``args`` for a factory of one (``partial(torch.autocast, ...)``, ``lambda: torch.autocast(...)``,
    ``torch.autocast`` itself; entered as ``with ctx(...):``). ``maybe_off``: the name may hold
    something else (``nullcontext()``) on another arm."""

    __slots__ = ("region", "func", "args", "maybe_off")

    def __init__(self, region: Region | None = None, func=None, args: tuple = (), maybe_off: bool = False) -> None:
        self.region, self.func, self.args, self.maybe_off = region, func, args, maybe_off

    def opened(self, item: cst.BaseExpression, ctx, top: int, path: tuple) -> Region | None:
        """The region the ``with`` item ``item`` (the name, or a call of it) opens, if any."""
        if self.region is not None:
            if item.__class__ is cst.Call:
                return None
            region = self.region.opened_at(item, top, path)
        else:
            if item.__class__ is not cst.Call:
                return None
            found = parse_region(cst.Call(func=self.func, args=(*self.args, *item.args)), ctx, top)
            if found is None:
                return None
            region = found.opened_at(item, top, path)
        if self.maybe_off and region.enabled is True:
            region.enabled = "expr"
        return region


def bound_context(value: cst.BaseExpression, ctx) -> BoundContext | None:
    """What binding ``value`` to a name makes of it (:class:`BoundContext`), or ``None`` when
    it opens no autocast region. One arm of a conditional expression is enough
    (``torch.autocast if use_amp else nullcontext``)."""
    kind = value.__class__
    if kind is cst.Call or kind is cst.IfExp:
        region = parse_region(value, ctx)
        if region is not None:
            return BoundContext(region, maybe_off=region.enabled == "expr")
    if kind is cst.IfExp:
        for side in (value.body, value.orelse):
            found = bound_context(side, ctx)
            if found is not None:
                found.maybe_off = True
                return found
        return None
    if kind is cst.Lambda and not value.params.params and value.body.__class__ is cst.Call:
        body = value.body
        return BoundContext(func=body.func, args=tuple(body.args)) if ctx.resolve(body.func) in AUTOCAST else None
    if kind is cst.Call and ctx.resolve(value.func) == "functools.partial" and value.args:
        first = value.args[0]
        if first.keyword is None and not first.star and ctx.resolve(first.value) in AUTOCAST:
            return BoundContext(func=first.value, args=tuple(value.args[1:]))
        return None
    if (kind is cst.Name or kind is cst.Attribute) and ctx.resolve(value) in AUTOCAST:
        return BoundContext(func=value)
    return None
