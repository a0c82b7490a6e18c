"""The availability guard of RULES.md, shared by every rule.

Code under a guard only runs where an accelerator exists (or is in use), so device-specific
calls there are portable. :func:`polarity` classifies a test expression:

* ``+1``: its true branch is guarded: ``torch.cuda.is_available()``, ``torch.backends.mps``/
  ``torch.xpu``/``torch.accelerator`` equivalents, ``torch.cuda.device_count() > 0``, a name
  assigned from such a test (``use_cuda = torch.cuda.is_available() and not args.no_cuda``,
  also a parameter default or an argparse ``default=``), a device-type test
  (``device.type == "cuda"``, ``x.device == torch.device("cuda")``, ``x.is_cuda``,
  ``str(device).startswith("cuda")``, ``device != "cpu"``), ``isinstance(device, int)`` (torch
  reads an int device as a CUDA ordinal), ``a and b`` when either side is guarded;
* ``-1``: its false branch is guarded (``not torch.cuda.is_available()``, ``device == "cpu"``,
  ``not torch.cuda.is_available() and not torch.backends.mps.is_available()``: true on a
  CPU-only machine);
* ``0``: unknown.

Names never guard by themselves (RULES.md): not a file's name (``train_gpu.py``), not a
helper's (``def to_cuda(x)``), not a configuration flag (``if args.use_cuda:``, whose default of
True crashes on a CPU machine). The remaining name-based exemptions, each with a fixture in
``fixtures/lint/dev10x_library_guards_ok.py``: a class that is one accelerator's backend
(:func:`accelerator_backend`), a class's own ``def cuda(self)`` (:func:`device_method`),
transformers' ``self.model_parallel`` flag, ``cuda_device is not None`` (a CUDA device handed
in), and helper predicates named as availability tests (``is_xpu_available()``). A distributed
backend that only runs with CUDA (``backend == "nccl"``) is a test that CUDA is in use.
"""

from __future__ import annotations

import functools
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
#: Tensor properties that test where the tensor lives (``x.is_cuda``), and the one flag kept by
#: name: transformers' ``self.model_parallel``, False by default and set only by
#: ``parallelize()``, which places the model on CUDA devices.
_CUDA_DEVICE_NAME = re.compile(r"^(cuda|gpu)_(device|device_id|id|idx|index)$")
_DEVICE_PROPERTIES = frozenset({"is_cuda", "is_mps", "is_xpu", "model_parallel"})
#: A configuration flag named for an accelerator (``args.cuda``, ``cfg.use_gpu``): no guard.
_CONFIG_FLAG = re.compile(r"^(use_|on_|with_|enable_|run_on_)?(cuda|gpu|gpus|accelerator|mps|xpu)$")


def config_flag(expr: cst.BaseExpression, ctx) -> bool:
    """Is ``expr`` an attribute flag named for an accelerator (``args.cuda``, ``cfg.use_gpu``,
    ``opt.gpu``) that is not assigned from an availability test in this file?"""
    return (
        expr.__class__ is cst.Attribute
        and bool(_CONFIG_FLAG.match(expr.attr.value.lower()))
        and polarity(expr, ctx) == 0
    )
_DECORATOR = re.compile(r"(require|skip|only|need|gpu_test|cuda_test)", re.I)
_EXITS = {"pytest.skip", "sys.exit", "exit", "quit", "self.skipTest", "unittest.skip"}


def string_value(node: cst.CSTNode | None) -> str | None:
    """The value of a plain string literal (no f-string), else ``None``."""
    t = node.__class__
    if t is cst.SimpleString:
        text = node.value
        if "\\" not in text and "\r" not in text:  # no escape: the text between the quotes (no compile)
            prefix = node.prefix.lower()
            if "b" in prefix:
                return None
            return node.raw_value
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd literals are simply not strings to us
            return None
        return value if isinstance(value, str) else None
    if t is cst.ConcatenatedString:
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001
            return None
        return value if isinstance(value, str) else None
    return None


def _device_literal(node: cst.CSTNode) -> str | None:
    """The device type of ``"cuda:0"`` or of ``torch.device("cuda")``/``torch.device("cuda", 0)``."""
    if node.__class__ is cst.Call and (dotted(node.func) or "").endswith("device") and node.args:
        node = node.args[0].value
    value = string_value(node)
    return value.split(":", 1)[0] if value is not None else None


#: Distributed backends that only run with CUDA: ``backend == "nccl"`` tests for CUDA in use.
_CUDA_BACKENDS = ("nccl", "smddp")


def _is_accelerator_string(node: cst.CSTNode) -> bool:
    """``"cuda"``, ``torch.device("cuda")``, ``"nccl"``, ``dist.Backend.NCCL``, or a legacy
    CUDA type name (``x.type() == "torch.cuda.HalfTensor"``)."""
    if _device_literal(node) in ACCELERATORS:
        return True
    value = string_value(node)
    if value is not None:
        return value.lower() in _CUDA_BACKENDS or value.startswith("torch.cuda.")
    return node.__class__ is cst.Attribute and node.attr.value == "NCCL"


def _is_cpu_string(node: cst.CSTNode) -> bool:
    return _device_literal(node) == "cpu"


#: names that hold a device as it was handed in (``device``, ``gpu``, ``device_id``)
_ORDINAL_HOLDER = re.compile(r"^(device|dev|gpu|cuda_device|device_id|gpu_id)$", re.I)


def polarity(expr: cst.BaseExpression, ctx) -> int:
    """+1, -1 or 0 (see the module docstring) for an ``if``/``while``/conditional test."""
    t = expr.__class__  # exact types: libcst's node classes are never subclassed (names.dotted)
    if t is cst.UnaryOperation and expr.operator.__class__ is cst.Not:
        return -polarity(expr.expression, ctx)
    if t is cst.BooleanOperation:
        left, right = polarity(expr.left, ctx), polarity(expr.right, ctx)
        if expr.operator.__class__ is cst.And:
            # `not cuda and not mps`: true on a CPU-only machine, so what follows its `else` runs
            # only where an accelerator exists (pytorch/examples imagenet/main.py)
            return 1 if 1 in (left, right) else -1 if left == right == -1 else 0
        if left == right == 1:
            return 1
        return -1 if -1 in (left, right) else 0
    if t is cst.Call:
        name = ctx.names.resolve(expr.func)
        if name in AVAILABILITY:
            return 1
        func = expr.func
        called = dotted(func)
        if called and _HELPER.match(called.rsplit(".", 1)[-1]):
            return 1
        if func.__class__ is cst.Attribute and func.attr.value == "startswith" and expr.args:
            if _is_accelerator_string(expr.args[0].value):
                return 1
            if _is_cpu_string(expr.args[0].value):
                return -1
        if func.__class__ is cst.Name and func.value in ("bool", "len", "any") and expr.args:
            return polarity(expr.args[0].value, ctx)
        if func.__class__ is cst.Name and func.value == "isinstance" and len(expr.args) == 2:
            # isinstance(device, int): torch reads an int device as a CUDA ordinal (torch.device(0)
            # is cuda:0), so the caller that handed one asked for CUDA
            held, kind = dotted(expr.args[0].value) or "", expr.args[1].value
            if kind.__class__ is cst.Name and kind.value == "int" and _ORDINAL_HOLDER.search(held.rsplit(".", 1)[-1]):
                return 1
        return 0
    if t is cst.Comparison:
        return _comparison(expr, ctx)
    if t is cst.Name or t is cst.Attribute:
        name = dotted(expr)
        if name is None:
            # tables[0].is_cuda, self.buffers()[0].is_cuda: a test on a value, whatever it is
            return 1 if t is cst.Attribute and expr.attr.value in _DEVICE_PROPERTIES else 0
        if name in ctx.guard_names:
            return 1
        if name in ctx.negative_guard_names:
            return -1
        if t is cst.Attribute and expr.attr.value in _DEVICE_PROPERTIES:
            return 1  # x.is_cuda (a configuration flag such as args.cuda is no test: RULES.md)
        if t is cst.Attribute and name.rsplit(".", 1)[-1] in ctx.guard_attrs:
            return 1  # args.cuda where add_argument("--cuda", default=torch.cuda.is_available())
    return 0


def _comparison(expr: cst.Comparison, ctx) -> int:
    if len(expr.comparisons) != 1:
        return 0
    target = expr.comparisons[0]
    op, right, left = target.operator, target.comparator, expr.left
    left_call = left.__class__ is cst.Call  # exact type: no ABC isinstance on every comparison
    if (
        left_call and dotted(left.func) == "len" and left.args
        and (ctx.names.resolve(left.args[0].value) or "").startswith("torch.cuda.")
    ):
        # len(torch.cuda.default_generators) > 0
        return 1 if isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual, cst.NotEqual)) else 0
    counted = left_call and ctx.names.resolve(left.func) in AVAILABILITY
    if not counted and left.__class__ in (cst.Name, cst.Attribute) and right.__class__ is cst.Integer:
        counted = dotted(left) in ctx.guard_names  # n_gpus = torch.cuda.device_count(); if n_gpus == 0:
    if counted:
        # device_count() > 0, is_available() == True, device_count() == 0
        if right.__class__ is cst.Integer and right.value == "0":
            if isinstance(op, (cst.GreaterThan, cst.NotEqual)):
                return 1
            if isinstance(op, (cst.Equal, cst.LessThanEqual)):
                return -1
        if isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual)):
            return 1
        if isinstance(op, (cst.LessThan, cst.LessThanEqual)):
            return -1  # torch.cuda.device_count() < 2: too few devices
        if right.__class__ is cst.Name and right.value in ("True", "False") and isinstance(op, (cst.Equal, cst.Is)):
            return 1 if right.value == "True" else -1
        return 0
    if isinstance(op, (cst.IsNot,)) and right.__class__ is cst.Name and right.value == "None":
        if isinstance(left, (cst.Name, cst.Attribute)) and _CUDA_DEVICE_NAME.match(dotted(left).rsplit(".", 1)[-1] if dotted(left) else ""):
            return 1  # self.cuda_device is not None: a CUDA device was handed in, so CUDA is in use
        return polarity(left, ctx) if isinstance(left, (cst.Name, cst.Attribute)) else 0
    if isinstance(op, cst.Is) and right.__class__ is cst.Name and right.value == "None" and isinstance(left, (cst.Name, cst.Attribute)):
        return -polarity(left, ctx)  # dev is None, dev from a function that returns None without CUDA
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
_DEVICE_TOKENS = {"cuda", "gpu", "gpus", "mps", "xpu", "npu", "hpu", "xla", "tpu", "nccl", "cudnn"}
_BACKEND_SUFFIXES = ("Accelerator", "Backend", "Platform")


def names_a_device(name: str) -> bool:
    """Does ``name`` hold a device word as a token (``CUDAAccelerator``, ``get_gpu_info``;
    ``cudagraph`` is one token, not ``cuda``)? A name alone never guards (RULES.md): this only
    serves :func:`accelerator_backend`."""
    return any(t.lower() in _DEVICE_TOKENS for t in _NAME_TOKENS.findall(name))


def accelerator_backend(node: cst.ClassDef) -> bool:
    """``class CUDAAccelerator(Accelerator)``, ``class MPSBackend``: a class that *is* the
    backend of one accelerator (its name holds a device word and it, or a base, is named an
    accelerator, backend or platform). Such a class only runs where its device exists, by
    construction: the framework picks it after testing for the device."""
    if not names_a_device(node.name.value):
        return False
    names = [node.name.value, *((dotted(b.value) or "").rsplit(".", 1)[-1] for b in node.bases)]
    return any(n.endswith(_BACKEND_SUFFIXES) for n in names)


def device_method(name: str) -> bool:
    """``def cuda(self)`` in a class: the class's own ``.cuda()``, run only by a caller that asked
    for CUDA (where DEV102 reports the call). ``def to_cuda(x)`` is a helper, not this."""
    return name in ("cuda", "mps", "xpu", "npu", "hpu")


def _is_accelerator_tuple(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)) and node.elements:
        return all(_is_accelerator_string(e.value) for e in node.elements)
    return False


def broad_handler(node: cst.Try) -> bool:
    """``try: ... except Exception:`` (or bare, ``RuntimeError``, ``AssertionError``): a call
    that raises without an accelerator is handled there."""
    for handler in node.handlers:
        kinds = handler.type
        names = [dotted(e.value) for e in kinds.elements] if kinds.__class__ is cst.Tuple else [dotted(kinds)] if kinds else [None]
        if any(n in (None, "Exception", "BaseException", "RuntimeError", "AssertionError") for n in names):
            return True
    return False


def exits(statement: cst.CSTNode, ctx) -> bool:
    """Does this block end the scope (return/raise/continue/skip/exit, or a call of a function of
    the module that always ends in one: ``_skip_or_fail(msg)``) when it runs?"""
    body = getattr(statement, "body", None)
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        items = body.body
        if not items:
            return False
        last = items[-1]
        if last.__class__ is cst.SimpleStatementLine:
            last = last.body[-1] if last.body else None
        if isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
            return True
        if last.__class__ is cst.Expr and last.value.__class__ is cst.Call:
            called = dotted(last.value.func)
            return called in _EXITS or called in ctx.exit_functions
    return False


def none_without_accelerator(function: cst.FunctionDef, ctx) -> bool:
    """Does ``function`` begin (after its docstring) with ``if not torch.cuda.is_available():
    return None`` (or a bare ``return``)? Then whatever else it returns, it returns only where an
    accelerator is in use (torchrl's ``_cuda_memory_device``)."""
    body = [s for s in getattr(function.body, "body", ()) if not (
        s.__class__ is cst.SimpleStatementLine and s.body and s.body[0].__class__ is cst.Expr
        and s.body[0].value.__class__ in (cst.SimpleString, cst.ConcatenatedString))]
    if not body or body[0].__class__ is not cst.If or body[0].orelse is not None or polarity(body[0].test, ctx) != -1:
        return False
    inner = getattr(body[0].body, "body", ())
    last = inner[-1] if inner else None
    small = last.body[-1] if last.__class__ is cst.SimpleStatementLine and last.body else None
    return small.__class__ is cst.Return and (small.value is None or dotted(small.value) == "None")


def decorator_guards(decorators, ctx) -> bool:
    """``@pytest.mark.skipif(not torch.cuda.is_available(), ...)``, ``@require_torch_gpu``."""
    for decorator in decorators:
        expr = decorator.decorator
        func = expr.func if expr.__class__ is cst.Call else expr
        name = dotted(func) or ""
        if expr.__class__ is cst.Call:
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


def option_guards(call: cst.Call, ctx) -> set[str]:
    """``parser.add_argument("--use-cuda", default=torch.cuda.is_available())`` -> ``{"use_cuda"}``
    (also ``dest=``): the attribute the parsed option lands on is assigned from the test."""
    default = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "default"), None)
    if default is None or polarity(default, ctx) != 1:
        return set()
    dest = next((string_value(a.value) for a in call.args if a.keyword is not None and a.keyword.value == "dest"), None)
    if dest:
        return {dest}
    found = set()
    for arg in call.args:
        value = string_value(arg.value) if arg.keyword is None else None
        if value and value.startswith("-"):
            found.add(value.lstrip("-").replace("-", "_"))
    return found


def availability_lines(text: str) -> list[str]:
    """The lines of ``text`` (as ``text.splitlines()`` cuts them) that hold ``is_available`` or
    ``device_count`` and an ``=``, in order: only the lines around each occurrence are cut
    (splitting the 5,000 lines of a long file cost 2.5 ms on every lint)."""
    starts: set[int] = set()
    for word in ("is_available", "device_count"):
        at = text.find(word)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            starts.add(start)
            end = text.find("\n", at)
            at = text.find(word, end if end >= 0 else len(text))
    found = []
    for start in sorted(starts):
        end = text.find("\n", start)
        for line in text[start:end if end >= 0 else len(text)].splitlines():
            if ("is_available" in line or "device_count" in line) and "=" in line:
                found.append(line)
    return found


@functools.lru_cache(maxsize=512)
def _statement(line: str) -> cst.BaseStatement | None:
    """``line`` parsed as one statement (libcst nodes are immutable: shared between lints), or
    ``None`` when it is not a whole statement."""
    try:
        return cst.parse_statement(line)
    except Exception:  # noqa: BLE001 - a line that is not a whole statement
        return None


def assigned_guards(text: str, ctx) -> tuple[set[str], set[str]]:
    """Names assigned from an availability test anywhere in the file (``use_cuda =
    torch.cuda.is_available() and not args.cpu`` in ``main()`` also guards ``if use_cuda:`` in a
    helper above it that takes ``use_cuda`` as a parameter): (positive, negative) dotted names.
    Only lines that mention an availability call are parsed (:func:`availability_lines`)."""
    positive: set[str] = set()
    negative: set[str] = set()
    if "is_available" not in text and "device_count" not in text:
        return positive, negative
    for line in availability_lines(text):
        statement = _statement(line.strip())
        if statement.__class__ is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if small.__class__ is cst.Assign:
                pol = polarity(small.value, ctx)
                for target in small.targets:
                    name = dotted(target.target)
                    if name and pol:
                        (positive if pol == 1 else negative).add(name)
    return positive, negative
    for line in text.splitlines():
        if ("is_available" not in line and "device_count" not in line) or "=" not in line:
            continue
        try:
            statement = cst.parse_statement(line.strip())
        except Exception:  # noqa: BLE001 - a line that is not a whole statement
            continue
        if statement.__class__ is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if small.__class__ is cst.Assign:
                pol = polarity(small.value, ctx)
                for target in small.targets:
                    name = dotted(target.target)
                    if name and pol:
                        (positive if pol == 1 else negative).add(name)
    return positive, negative
