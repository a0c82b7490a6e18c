"""Where an expression is used *as a device*, and what device a literal names.

Shared by the DEV1xx rules. A device position is: the first argument of ``torch.device``,
``.to(...)``, ``torch.autocast``/``torch.amp.autocast``, ``torch.amp.GradScaler`` and
``torch.set_default_device``; and the keywords ``device=``, ``map_location=``,
``device_type=``, ``pin_memory_device=`` and ``device_map=`` (transformers/accelerate
loading) of any call.
"""

from __future__ import annotations

import re

import libcst as cst

from .guards import string_value

ACCELERATOR = re.compile(r"^(cuda|mps|xpu)(:\d+)?$")
DEVICE_KEYWORDS = frozenset({"device", "map_location", "device_type", "pin_memory_device", "device_map"})
_INDEXED = ("cuda:", "xpu:", "mps:")
POSITIONAL_DEVICE_CALLS = frozenset(
    {
        "torch.device",
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.autocast_mode.autocast",
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.GradScaler",
        "torch.set_default_device",
        "torch.get_device_module",
    }
)


def literal_device(node: cst.CSTNode | None) -> str | None:
    """``"cuda"``, ``"cuda:1"``, ``"mps"``, ``"xpu"`` for such a literal; a device index built
    into the string (``f"cuda:{rank}"``, ``"cuda:{}".format(rank)``, ``"cuda:%d" % rank``,
    ``"cuda:" + str(rank)``) counts as ``"cuda:N"``; ``None`` otherwise."""
    value = string_value(node)
    if value is not None:
        return value if ACCELERATOR.match(value) else None
    if node.__class__ is cst.FormattedString and node.parts:
        head = node.parts[0]
        if head.__class__ is cst.FormattedStringText and head.value in _INDEXED and len(node.parts) == 2:
            return head.value + "N"
        return None
    template, holes = None, ()
    if node.__class__ is cst.Call and node.func.__class__ is cst.Attribute and node.func.attr.value == "format":
        template, holes = string_value(node.func.value), ("{}", "{0}")
    elif node.__class__ is cst.BinaryOperation and node.operator.__class__ is cst.Modulo:
        template, holes = string_value(node.left), ("%d", "%s", "%i")
    elif node.__class__ is cst.BinaryOperation and node.operator.__class__ is cst.Add and not isinstance(node.right, cst.BaseString):
        template, holes = string_value(node.left), ("",)
    if template is not None:
        for prefix in _INDEXED:
            if template.startswith(prefix) and template[len(prefix):] in holes:
                return prefix + "N"
    return None


def is_cpu(node: cst.CSTNode | None, ctx=None) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if string_value(node) == "cpu":
        return True
    if node.__class__ is cst.Call and ctx is not None and ctx.resolve(node.func) == "torch.device" and node.args:
        return string_value(node.args[0].value) == "cpu"
    return False


def device_arguments(call: cst.Call, ctx) -> list[cst.BaseExpression]:
    """The expressions of ``call`` that sit in a device position (see the module docstring)."""
    found = []
    positional = [a for a in call.args if a.keyword is None and not a.star]
    func = call.func
    name = ctx.resolve(func)
    if positional and (
        name in POSITIONAL_DEVICE_CALLS
        or (func.__class__ is cst.Attribute and func.attr.value == "to" and not (name or "").startswith(("torch.", "unittest.mock.")))
    ):
        found.append(positional[0].value)
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in DEVICE_KEYWORDS:
            found.append(arg.value)
        elif arg.keyword is not None and arg.keyword.value == "type" and name == "torch.device":
            found.append(arg.value)
    return found
