"""What one Python file offers the files that import it, from its stdlib ``ast``.

A *summary* is a small JSON-able dict, computed without libcst and kept by content hash
(:mod:`devlint.project.index`):

* ``imports``: local name -> ``[level, module, name]`` for the module-level imports
  (``name`` is ``None`` for ``import a.b``; ``level`` counts the dots of a relative import);
* ``functions``: module-level function -> what every ``return`` of it gives:

  - ``"moves"``: its first argument moved to a device (``x.to(device)``, ``.cuda()``, a dict or
    list comprehension of moved items, a recursive call, the argument itself when it is no
    tensor in one branch, or the argument whose items were moved in place);
  - ``"loader"``: a ``torch.utils.data.DataLoader`` (iterating it yields CPU batches), unless
    its ``collate_fn`` or its Dataset's ``__getitem__`` (of this file) moves the batch;
  - ``"loaders"``: a tuple of such DataLoaders (``return train_loader, val_loader``);
  - ``"cpu"``/``"cpub"``: a CPU tensor (a factory call without ``device=``,
    ``torch.from_numpy``, ``torch.tensor`` of a list) or a dict/tuple of them;

* ``classes``: class -> ``{"bases": [dotted base names], "torch": derives from a
  ``torch.nn`` class, "methods": [...], "tensors": [plain CPU tensor attributes set in
  ``__init__``], "reads": [attributes ``forward`` reads as tensors]}``.

Anything the summary cannot tell for sure is left out: a rule then knows nothing, as for a
helper it cannot see. Only same-file calls are followed (a helper returning another module's
helper's result is unknown).
"""

from __future__ import annotations

import ast
import re

#: torch factories that allocate on the CPU unless given ``device=`` (as ``devlint.dataflow``)
_FACTORIES = frozenset(
    "zeros ones empty full arange range randn rand randint randperm eye linspace logspace".split()
)
_JOINS = frozenset({"stack", "cat", "concat", "vstack", "hstack"})
_DTYPES = frozenset(
    "float16 half bfloat16 float32 float float64 double int8 uint8 int16 short int32 int int64 long bool".split()
)
_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
#: reads in ``forward`` that do not use the tensor's data (DEV113 leaves them alone)
_SHAPE_ONLY = frozenset({"shape", "device", "dtype", "ndim", "size", "dim", "numel", "is_cuda", "to", "cuda", "type_as"})
_TORCH_BASES = ("torch.nn.", "lightning.", "pytorch_lightning.")
_MOVED = frozenset({"dev", "devb", "self", "selfb"})
#: text a function must hold for any return of it to have a kind
_CLUES = (".to(", ".cuda(", "DataLoader", "torch", "from_numpy")
#: names of a device the caller chose (``device``, ``cfg.device``, ``local_rank``, ``gpu``)
_DEVICE_NAME = re.compile(r"(^|_)(device|dev|gpu|cuda|rank|local_rank)s?($|_)", re.I)
#: roots of an attribute that holds the run's device (``cfg.device``, ``self.device``, ``model.device``)
_HOLDER = re.compile(r"^(self|cfg|conf|config|configs|args|opt|opts|hparams|hp|params|options|settings|trainer|"
                     r"accelerator|fabric|model|net|module|state|env|runtime)$", re.I)


def summarize(text: str) -> dict:
    """The summary of a file's source (see the module docstring); an empty one for text the
    stdlib cannot parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return {"imports": {}, "functions": {}, "classes": {}}
    try:
        return _Summarizer(tree, text.split("\n")).result()
    except RecursionError:  # pragma: no cover - a pathological nesting
        return {"imports": {}, "functions": {}, "classes": {}}


def _dotted(node: ast.AST | None) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _children(node: ast.AST) -> list[ast.AST]:
    """``list(ast.iter_child_nodes(node))``, read inline (its generators were most of the
    cost of a summary)."""
    found = []
    for field in node._fields:
        value = getattr(node, field, None)
        if value.__class__ is list:
            found.extend(item for item in value if isinstance(item, ast.AST))
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _own_nodes(function: ast.AST):
    """The nodes of a function body, nested functions, lambdas and classes left out."""
    stack = _children(function)
    while stack:
        node = stack.pop()
        yield node
        if node.__class__ not in _SCOPES:
            stack.extend(_children(node))


class _Summarizer:
    def __init__(self, tree: ast.Module, lines: list[str]) -> None:
        self.tree, self.lines = tree, lines
        self.imports: dict[str, list] = {}
        for node in tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = [0, alias.name, None]
                    else:
                        top = alias.name.split(".", 1)[0]
                        self.imports[top] = [0, top, None]
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name != "*":
                        self.imports[alias.asname or alias.name] = [node.level, node.module or "", alias.name]
        self.functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.class_nodes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.kinds: dict[str, str] = {}
        self._fn: ast.AST | None = None
        self._params: list[str] = []
        self._loop_names: set[str] = set()
        self._bindings: dict[str, list[ast.AST]] = {}
        self._depth = 0

    # ---- names through this file's imports ------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        found = self.imports.get(head)
        if found is None or found[0]:
            return None
        full = found[1] if found[2] is None else f"{found[1]}.{found[2]}"
        return f"{full}.{rest}" if rest else full

    # ---- functions --------------------------------------------------------------------------
    def result(self) -> dict:
        for _ in range(3):  # same-file helpers of helpers: a few rounds reach a fixpoint
            before = dict(self.kinds)
            calls = tuple(f"{k}(" for k in self.kinds)
            for name, fn in self.functions.items():
                segment = self._segment(fn)
                if "return" not in segment or not any(t in segment for t in _CLUES + calls):
                    self.kinds.pop(name, None)  # nothing in it could make a kind: spare the walk
                    continue
                kind = self._function(fn)
                if kind is None:
                    self.kinds.pop(name, None)
                else:
                    self.kinds[name] = kind
            if before == self.kinds:
                break
        classes = {name: self._class(node) for name, node in self.class_nodes.items()}
        return {"imports": self.imports, "functions": dict(self.kinds), "classes": classes}

    def _segment(self, node: ast.AST) -> str:
        """The source lines of ``node``."""
        return "\n".join(self.lines[node.lineno - 1:getattr(node, "end_lineno", node.lineno) or node.lineno])

    def _function(self, fn) -> str | None:
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        self._fn, self._params = fn, params
        self._bindings = {}
        self._loop_names = {
            n.id for node in _own_nodes(fn) if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension))
            for n in ast.walk(node.target) if isinstance(n, ast.Name)
        }
        returns = []
        for node in _own_nodes(fn):
            if isinstance(node, ast.Return):
                returns.append(node.value)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._note_binding(target, node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                self._bindings.setdefault(node.target.id, []).append(None)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.NamedExpr, ast.withitem, ast.comprehension)):
                target = node.optional_vars if isinstance(node, ast.withitem) else node.target
                for inner in ast.walk(target) if target is not None else ():
                    if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                        self._bindings.setdefault(inner.id, []).append(None)
        if not returns or any(r is None for r in returns):
            return None
        kinds = [self.kind(r) for r in returns]
        first = params[0] if params else None
        if first is not None and all(k in _MOVED or k == ("param", first) for k in kinds) \
                and any(k in ("dev", "devb") for k in kinds):
            return "moves"  # a recursive call counts once some return really moves
        if all(k == "loader" for k in kinds):
            return "loader"
        if all(k == "loaders" for k in kinds):
            return "loaders"
        if all(k in ("cpu", "cpub") for k in kinds):
            return "cpub" if "cpub" in kinds else "cpu"
        return None

    def _note_binding(self, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self._bindings.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            # batch[k] = batch[k].to(device): the parameter's items are moved in place
            self._bindings.setdefault("[]" + target.value.id, []).append(value)
        else:
            for inner in ast.walk(target):
                if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    self._bindings.setdefault(inner.id, []).append(None)

    def kind(self, expr: ast.AST | None):
        """``"dev"``, ``"devb"``, ``"cpu"``, ``"cpub"``, ``"loader"``, ``"loaders"``,
        ``("param", name)`` or ``None`` for an expression of the function being summarized."""
        if expr is None or self._depth > 20:
            return None
        self._depth += 1
        try:
            return self._kind(expr)
        finally:
            self._depth -= 1

    def _kind(self, expr: ast.AST):
        if isinstance(expr, ast.Name):
            if expr.id in self._params:
                moved = self._bindings.get("[]" + expr.id)
                if expr.id not in self._bindings and moved and all(self.kind(v) in ("dev", "devb") for v in moved):
                    return "devb"
                return ("param", expr.id) if expr.id not in self._bindings else None
            values = self._bindings.get(expr.id)
            if not values or len(values) != 1 or values[0] is None:
                return None
            return self.kind(values[0])
        if isinstance(expr, (ast.DictComp, ast.ListComp, ast.GeneratorExp)):
            inner = self.kind(expr.value if isinstance(expr, ast.DictComp) else expr.elt)
            return {"dev": "devb", "devb": "devb", "cpu": "cpub", "self": "selfb", "selfb": "selfb"}.get(inner) \
                if isinstance(inner, str) else None
        if isinstance(expr, (ast.Tuple, ast.List, ast.Dict)):
            values = expr.values if isinstance(expr, ast.Dict) else expr.elts
            if not values or any(v is None or isinstance(v, ast.Starred) for v in values):
                return None
            kinds = {self.kind(v) for v in values}
            if kinds <= {"self", "selfb"}:
                return "selfb"
            if kinds <= _MOVED:
                return "devb"
            if kinds <= {"cpu"}:
                return "cpub"
            if kinds == {"loader"} and isinstance(expr, ast.Tuple) and len(values) > 1:
                return "loaders"
            return None
        if isinstance(expr, ast.BinOp):  # arithmetic with a number keeps the tensor's device
            sides = [self.kind(side) for side in (expr.left, expr.right) if not isinstance(side, ast.Constant)]
            return sides[0] if len(sides) == 1 and sides[0] in ("cpu", "dev") else None
        if isinstance(expr, ast.IfExp):
            a, b = self.kind(expr.body), self.kind(expr.orelse)
            return a if a == b else None
        if isinstance(expr, ast.Call):
            return self._call(expr)
        return None

    def _call(self, call: ast.Call):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda"):
            if not self._from_args(func.value):
                return None  # a new tensor placed somewhere: not the argument moved
            if func.attr == "cuda":
                return "dev"
            target = next((a for a in call.args if not isinstance(a, ast.Starred)), None)
            for keyword in call.keywords:
                if keyword.arg == "device":
                    target = keyword.value
            if target is None or self._is_dtype(target) or _string(target) == "cpu":
                return None
            return "dev" if self._device_target(target) else None
        if isinstance(func, ast.Name):
            if self._fn is not None and func.id == self._fn.name:
                return "self"  # a recursive call: moved only if another return moves
            if self.kinds.get(func.id) == "moves":
                return "dev"  # a moving helper of this file
            if func.id in self.kinds and self.kinds[func.id] != "moves":
                return self.kinds[func.id]
            if func.id in ("tuple", "list", "dict") and len(call.args) == 1:
                return self.kind(call.args[0])
        if isinstance(func, ast.Call) and _dotted(func.func) == "type" and len(call.args) == 1:
            return self.kind(call.args[0])  # type(batch)(move(b, device) for b in batch)
        name = self.resolve(func)
        if name in _LOADERS:
            return "loader" if not self._placing_loader(call) else None
        if name is None or not name.startswith("torch."):
            return None
        short = name[6:]
        if any(k.arg == "device" for k in call.keywords):
            return None
        if short == "from_numpy":
            return "cpu"
        if short in ("tensor", "as_tensor"):
            first = call.args[0] if call.args else None
            return "cpu" if isinstance(first, (ast.List, ast.ListComp)) or isinstance(first, ast.Tuple) and first.elts else None
        if short in _FACTORIES:
            sizes = [a for a in call.args if not isinstance(a, ast.Starred)]
            if not sizes or (len(sizes) == 1 and isinstance(sizes[0], (ast.Tuple, ast.List)) and not sizes[0].elts):
                return None  # 0-dim
            return "cpu"
        if short in _JOINS and call.args:
            return "cpu" if self.kind(call.args[0]) == "cpub" else None
        return None

    def _from_args(self, expr: ast.AST) -> bool:
        """Is ``expr`` (through methods, attributes and indexing) one of the function's
        parameters, or an item a loop or comprehension of it takes?"""
        while True:
            if isinstance(expr, ast.Call):
                expr = expr.func
            elif isinstance(expr, (ast.Attribute, ast.Subscript)):
                expr = expr.value
            else:
                break
        return isinstance(expr, ast.Name) and (expr.id in self._params or expr.id in self._loop_names)

    def _device_target(self, target: ast.AST) -> bool:
        """Does ``.to(target)`` name an accelerator chosen by the caller (a ``device``
        parameter, ``cfg.device``, ``model.device``, ``"cuda"``), not another tensor's own
        device (``x.to(ref.device)``, ``x.to(ref)``: the result follows ``ref``)?"""
        if isinstance(target, ast.Constant):
            return isinstance(target.value, (str, int)) and not isinstance(target.value, bool)
        if isinstance(target, ast.Name):
            return bool(_DEVICE_NAME.search(target.id))
        if isinstance(target, ast.Attribute):
            root = target
            while isinstance(root, ast.Attribute):
                root = root.value
            return bool(_DEVICE_NAME.search(target.attr)) and isinstance(root, ast.Name) and bool(_HOLDER.match(root.id))
        if isinstance(target, ast.Call):
            return self.resolve(target.func) == "torch.device"
        return False

    def _is_dtype(self, expr: ast.AST) -> bool:
        name = self.resolve(expr) or ""
        return (name.startswith("torch.") and name[6:] in _DTYPES) or (_dotted(expr) or "").endswith("dtype")

    def _placing_loader(self, call: ast.Call) -> bool:
        """Does a DataLoader built here get device batches: a ``collate_fn`` of this file, or
        a Dataset class of this file, whose code moves tensors?"""
        for keyword in call.keywords:
            if keyword.arg == "collate_fn":
                value = keyword.value
                fn = self.functions.get(value.id) if isinstance(value, ast.Name) else None
                if isinstance(value, ast.Lambda) and _moves_anything(value, self.functions):
                    return True
                if fn is not None and _moves_anything(fn, self.functions):
                    return True  # this file's collate function moves the batch
        dataset = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "dataset"), None)
        while isinstance(dataset, ast.Name) and len(self._bindings.get(dataset.id) or ()) == 1:
            dataset = self._bindings[dataset.id][0]
        if isinstance(dataset, ast.Call):
            cls = self.class_nodes.get(_dotted(dataset.func) or "")
            if cls is not None and any(
                isinstance(m, ast.FunctionDef) and m.name == "__getitem__" and _moves_anything(m, self.functions)
                for m in cls.body
            ):
                return True
        return False

    # ---- classes ------------------------------------------------------------------------
    def _class(self, node: ast.ClassDef) -> dict:
        bases = [b for b in (_dotted(base) for base in node.bases) if b]
        resolved = [self.resolve(base) or "" for base in node.bases]
        methods = {m.name: m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        tensors = []
        init = methods.get("__init__")
        if init is not None and "torch" in self._segment(init):
            tensors = self._plain_tensors(init)
        reads = []
        forward = methods.get("forward")
        if forward is not None and "self." in self._segment(forward):
            reads = _tensor_reads(forward)
        return {
            "bases": bases,
            "torch": any(r.startswith(_TORCH_BASES) for r in resolved),
            "methods": sorted(methods),
            "tensors": tensors,
            "reads": reads,
        }

    def _plain_tensors(self, init) -> list[str]:
        args = [a.arg for a in (*init.args.posonlyargs, *init.args.args)]
        if not args:
            return []
        me = args[0]
        self._fn, self._params, self._bindings, self._loop_names = init, args[1:], {}, set()
        assigned: dict[str, list[ast.AST]] = {}
        registered: set[str] = set()
        for node in _own_nodes(init):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._note_binding(target, node.value)
                    if isinstance(target, ast.Attribute) and _dotted(target.value) == me:
                        assigned.setdefault(target.attr, []).append(node.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _dotted(node.func.value) == me \
                    and node.func.attr in ("register_buffer", "register_parameter") and node.args:
                registered.add(_string(node.args[0]) or "")
        return sorted(
            attr for attr, values in assigned.items()
            if attr not in registered and len(values) == 1 and self.kind(values[0]) == "cpu"
        )


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _moves_anything(fn: ast.AST, functions: dict | None = None, seen: set | None = None) -> bool:
    """Does ``fn`` call ``.to(...)``/``.cuda()``, itself or through a function of the file?"""
    seen = set() if seen is None else seen
    seen.add(id(fn))
    for n in _own_nodes(fn) if not isinstance(fn, ast.Lambda) else ast.walk(fn.body):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "cuda"):
                return True
            called = functions.get(n.func.id) if functions and isinstance(n.func, ast.Name) else None
            if called is not None and id(called) not in seen and _moves_anything(called, functions, seen):
                return True
    return False


def _tensor_reads(forward) -> list[str]:
    """Attributes of ``self`` that ``forward`` reads as tensors (not only their shape, not
    moved on the spot) and does not assign."""
    args = [a.arg for a in forward.args.args]
    if not args:
        return []
    me = args[0]
    reads, skipped, written = set(), set(), set()
    for node in _own_nodes(forward):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and _dotted(node.value.value) == me \
                and node.attr in _SHAPE_ONLY:
            skipped.add(id(node.value))
    for node in _own_nodes(forward):
        if isinstance(node, ast.Attribute) and _dotted(node.value) == me:
            if isinstance(node.ctx, ast.Store):
                written.add(node.attr)
            elif id(node) not in skipped:
                reads.add(node.attr)
    return sorted(reads - written)
