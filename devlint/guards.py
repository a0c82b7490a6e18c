"""The availability guard of RULES.md, shared by every rule.

Code under a guard only runs where an accelerator exists (or is in use), so device-specific
calls there are portable. :func:`polarity` classifies a test expression:

* ``+1``: its true branch is guarded: ``torch.cuda.is_available()``, ``torch.backends.mps``/
  ``torch.xpu``/``torch.accelerator`` equivalents, ``torch.cuda.device_count() > 0``, a name
  assigned from such a test (``use_cuda = torch.cuda.is_available() and not args.no_cuda``),
  a device-type test (``device.type == "cuda"``, ``x.is_cuda``,
  ``str(device).startswith("cuda")``, ``device != "cpu"``), a flag named for the accelerator
  (``args.cuda``, ``use_gpu``), ``a and b`` when either side is guarded;
* ``-1``: its false branch is guarded (``not torch.cuda.is_available()``, ``device == "cpu"``);
* ``0``: unknown.
"""

from __future__ import annotations

import re

import libcst as cst

from .names import dotted

AVAILABILITY = frozenset(
    {
        "torch.cuda.is_available",
        "torch.cuda.device_count",
        "torch.cuda.is_bf16_supported",
        "torch.cuda.is_initialized",
        "torch.backends.mps.is_available",
        "torch.backends.mps.is_built",
        "torch.mps.is_available",
        "torch.xpu.is_available",
        "torch.xpu.device_count",
        "torch.accelerator.is_available",
        "torch.accelerator.device_count",
        "torch.accelerator.current_accelerator",
        "torch.backends.cudnn.is_available",
    }
)
ACCELERATORS = ("cuda", "mps", "xpu", "hpu", "npu", "xla", "gpu", "mlu", "musa")
#: Library helpers that test for an accelerator: accelerate's ``is_xpu_available()``,
#: transformers' ``is_torch_cuda_available()``, ``is_bf16_supported``-style checks.
_HELPER = re.compile(r"^(is_|has_|check_)\w*(cuda|gpu|mps|xpu|npu|mlu|musa|hpu|xla|tpu|accelerator|nccl|model_parallel)\w*(available|supported|capability)\w*$")
_FLAG = re.compile(r"^(use_|on_|is_|has_|with_|enable_|run_on_)?(cuda|gpu|gpus|accelerator|mps|xpu|model_parallel)$")
_DECORATOR = re.compile(r"(require|skip|only|need|gpu_test|cuda_test)", re.I)
_EXITS = {"pytest.skip", "sys.exit", "exit", "quit", "self.skipTest", "unittest.skip"}


def string_value(node: cst.CSTNode | None) -> str | None:
    """The value of a plain string literal (no f-string), else ``None``."""
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd literals are simply not strings to us
            return None
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001
            return None
        return value if isinstance(value, str) else None
    return None


def _is_accelerator_string(node: cst.CSTNode) -> bool:
    value = string_value(node)
    return value is not None and value.split(":", 1)[0] in ACCELERATORS


def _is_cpu_string(node: cst.CSTNode) -> bool:
    return string_value(node) == "cpu"


def polarity(expr: cst.BaseExpression, ctx) -> int:
    """+1, -1 or 0 (see the module docstring) for an ``if``/``while``/conditional test."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return -polarity(expr.expression, ctx)
    if isinstance(expr, cst.BooleanOperation):
        left, right = polarity(expr.left, ctx), polarity(expr.right, ctx)
        if isinstance(expr.operator, cst.And):
            return 1 if 1 in (left, right) else 0
        if left == right == 1:
            return 1
        return -1 if -1 in (left, right) else 0
    if isinstance(expr, cst.Call):
        name = ctx.names.resolve(expr.func)
        if name in AVAILABILITY:
            return 1
        func = expr.func
        called = dotted(func)
        if called and _HELPER.match(called.rsplit(".", 1)[-1]):
            return 1
        if isinstance(func, cst.Attribute) and func.attr.value == "startswith" and expr.args:
            if _is_accelerator_string(expr.args[0].value):
                return 1
            if _is_cpu_string(expr.args[0].value):
                return -1
        if isinstance(func, cst.Name) and func.value in ("bool", "len", "any") and expr.args:
            return polarity(expr.args[0].value, ctx)
        return 0
    if isinstance(expr, cst.Comparison):
        return _comparison(expr, ctx)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        name = dotted(expr)
        if name is None:
            return 0
        if name in ctx.guard_names:
            return 1
        if name in ctx.negative_guard_names:
            return -1
        if _FLAG.match(name.rsplit(".", 1)[-1].lower()):
            return 1
    return 0


def _comparison(expr: cst.Comparison, ctx) -> int:
    if len(expr.comparisons) != 1:
        return 0
    target = expr.comparisons[0]
    op, right, left = target.operator, target.comparator, expr.left
    if (
        isinstance(left, cst.Call) and dotted(left.func) == "len" and left.args
        and (ctx.names.resolve(left.args[0].value) or "").startswith("torch.cuda.")
    ):
        # len(torch.cuda.default_generators) > 0
        return 1 if isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual, cst.NotEqual)) else 0
    if isinstance(left, cst.Call) and ctx.names.resolve(left.func) in AVAILABILITY:
        # device_count() > 0, is_available() == True, device_count() == 0
        if isinstance(right, cst.Integer) and right.value == "0":
            if isinstance(op, (cst.GreaterThan, cst.NotEqual)):
                return 1
            if isinstance(op, (cst.Equal, cst.LessThanEqual)):
                return -1
        if isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual)):
            return 1
        if isinstance(right, cst.Name) and right.value in ("True", "False") and isinstance(op, (cst.Equal, cst.Is)):
            return 1 if right.value == "True" else -1
        return 0
    if isinstance(op, (cst.IsNot,)) and isinstance(right, cst.Name) and right.value == "None":
        return polarity(left, ctx) if isinstance(left, (cst.Name, cst.Attribute)) else 0
    sides = (left, right)
    accel = any(_is_accelerator_string(s) or _is_accelerator_tuple(s) for s in sides)
    cpu = any(_is_cpu_string(s) or _holds_cpu(s) for s in sides)
    if isinstance(op, (cst.Equal, cst.In, cst.Is)):
        return 1 if accel else (-1 if cpu else 0)
    if isinstance(op, (cst.NotEqual, cst.NotIn, cst.IsNot)):
        return -1 if accel else (1 if cpu else 0)
    return 0


def _holds_cpu(node: cst.CSTNode) -> bool:
    """``{"cpu", "mps"}``: a device-type collection that holds ``"cpu"``."""
    return isinstance(node, (cst.Tuple, cst.List, cst.Set)) and any(_is_cpu_string(e.value) for e in node.elements)


_NAME_TOKENS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_DEVICE_TOKENS = {"cuda", "gpu", "gpus", "mps", "xpu", "nccl", "cudnn"}


def names_a_device(name: str) -> bool:
    """``CUDAAccelerator``, ``get_gpu_info``, ``test_cuda``: code whose name says it is for an
    accelerator (camel-case and snake-case tokens; ``cudagraph`` is one token, not ``cuda``)."""
    return any(t.lower() in _DEVICE_TOKENS for t in _NAME_TOKENS.findall(name))


def _is_accelerator_tuple(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)) and node.elements:
        return all(_is_accelerator_string(e.value) for e in node.elements)
    return False


def broad_handler(node: cst.Try) -> bool:
    """``try: ... except Exception:`` (or bare, ``RuntimeError``, ``AssertionError``): a call
    that raises without an accelerator is handled there."""
    for handler in node.handlers:
        kinds = handler.type
        names = [dotted(e.value) for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [dotted(kinds)] if kinds else [None]
        if any(n in (None, "Exception", "BaseException", "RuntimeError", "AssertionError") for n in names):
            return True
    return False


def exits(statement: cst.CSTNode, ctx) -> bool:
    """Does this block end the scope (return/raise/continue/skip/exit) when it runs?"""
    body = getattr(statement, "body", None)
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        items = body.body
        if not items:
            return False
        last = items[-1]
        if isinstance(last, cst.SimpleStatementLine):
            last = last.body[-1] if last.body else None
        if isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
            return True
        if isinstance(last, cst.Expr) and isinstance(last.value, cst.Call):
            return dotted(last.value.func) in _EXITS
    return False


def decorator_guards(decorators, ctx) -> bool:
    """``@pytest.mark.skipif(not torch.cuda.is_available(), ...)``, ``@require_torch_gpu``."""
    for decorator in decorators:
        expr = decorator.decorator
        func = expr.func if isinstance(expr, cst.Call) else expr
        name = dotted(func) or ""
        if isinstance(expr, cst.Call):
            for arg in expr.args:
                pol = polarity(arg.value, ctx)
                if (pol == -1 and "skipif" in name.lower()) or (pol == 1 and "skipunless" in name.lower()):
                    return True
                if pol == 1 and "skipif" not in name.lower():
                    return True
        resolved = ctx.names.resolve(func) or ""
        if resolved.startswith("torch."):
            continue
        lowered = name.lower()
        if any(a in lowered for a in ("cuda", "gpu", "accelerator")) and _DECORATOR.search(lowered):
            return True
        if lowered.endswith((".cuda", ".gpu")) and "mark" in lowered:
            return True
    return False
