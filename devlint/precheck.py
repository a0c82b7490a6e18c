"""The ``ast`` pre-check: which rules could report anything in this file, before libcst parses it.

CPython's own parser builds a stdlib ``ast`` in about a tenth of the time libcst takes for
the same text, and most files that mention torch hold nothing a rule reports. One walk over
that tree collects :class:`Facts` (the calls by method and by name, the string literals, the
keyword arguments, the imports...), and each rule's ``candidate`` predicate (declared next to
its detection logic, in the rule's own file) reads them to say whether the file holds a node
the rule could report on. A rule without a predicate is always a candidate, so a rule added
later is never lost; libcst parses the file only for the candidate rules, and only if there is
one.

A predicate must be a necessary condition of every finding of its rule, on the raw
syntax: it over-approximates (imports anywhere in the file count, guards are ignored) and
never needs the libcst tree. ``tests/test_precheck.py`` lints every fixture, every public
case and the benchmark corpus with and without the pre-check and compares the findings.
"""

from __future__ import annotations

import ast
from typing import Iterable, Sequence

from .batches import BATCH_PARAMS
from .precheck_predicates import (arguments, builds_module, calls_in, dotted, has_backward, is_move, may_move,
                                  methods_of, module_class, own_nodes, resolves_to, strip_module_methods,
                                  top_functions, torch_dtype, unit_may_move, walk)

#: The rules import the shared predicates from here too (they live in ``precheck_predicates``).
__all__ = ["Unit", "Facts", "candidates", "CpuFlow", "arguments", "builds_module", "calls_in", "dotted",
           "has_backward", "is_move", "may_move", "methods_of", "module_class", "own_nodes", "resolves_to",
           "strip_module_methods", "top_functions", "torch_dtype", "unit_may_move", "walk"]

_Attribute, _Name, _Call, _Constant = ast.Attribute, ast.Name, ast.Call, ast.Constant
_EMPTY: tuple = ()
#: match patterns that bind a name (``case x``, ``case [*rest]``, ``case {**rest}``)
_CAPTURES = (ast.MatchAs, ast.MatchStar, ast.MatchMapping)


class Unit:
    """One top-level class or function of the module, or all its other top-level statements
    together (``node`` is then ``None``): the calls below it, by method and by plain name, and
    the keyword argument names they use. Rules whose state lives in a scope (a frame of the
    dataflow, a class) test the units that could hold that scope."""

    __slots__ = ("node", "statements", "methods", "functions", "keywords")

    def __init__(self, node: ast.AST | None) -> None:
        self.node = node
        #: the unit's top-level statements (``[node]`` for a class or function)
        self.statements: list[ast.stmt] = [node] if node is not None else []
        self.methods: dict[str, list[ast.Call]] = {}
        self.functions: dict[str, list[ast.Call]] = {}
        self.keywords: set[str] = set()

    def walk(self) -> Iterable[ast.AST]:
        """Every node of the unit's statements."""
        for statement in self.statements:
            yield from ast.walk(statement)

    def calls(self, *names: str) -> Iterable[ast.Call]:
        """Calls ``x.<name>(...)`` or ``<name>(...)`` in this unit for each of ``names``."""
        for name in names:
            yield from self.methods.get(name, _EMPTY)
            yield from self.functions.get(name, _EMPTY)


class Facts:
    """What one walk over a file's stdlib ``ast`` tells the rules' predicates.

    ``text`` is the source; ``tree`` the ``ast.Module``. ``methods`` maps a method name to the
    calls ``<expr>.<name>(...)``; ``functions`` a plain name to the calls ``<name>(...)``;
    ``attributes`` an attribute name to the ``<expr>.<name>`` nodes; ``strings`` holds every
    string literal (concatenated parts joined, as CPython joins them); ``fstring_heads`` the
    leading literal text of every f-string; ``placed`` the string literals and f-string heads
    that stand as a call argument, an assigned value or a parameter default (where a device
    literal does its harm), also as an arm of a conditional expression or the template of a
    built string (``"cuda:%d" % i``, ``"cuda:" + s``, ``"cuda:{}".format(i)``); ``keywords`` every keyword argument name of a call;
    ``defs`` the names of every ``def``; ``classes`` every ``ClassDef`` (``class_names`` their
    names); ``imported`` the dotted
    names every ``from m import n`` spells (``m.n``); ``modules`` every module an ``import m``
    or ``from m import ...`` names (star imports too); ``aliases`` maps a local name to every
    dotted module path an import anywhere in the file binds it to; ``units`` the file's
    :class:`Unit` s, the module's other statements first.
    """

    __slots__ = ("text", "tree", "methods", "functions", "attributes", "strings", "fstring_heads", "placed",
                 "keywords", "defs", "classes", "class_names", "imported", "modules", "aliases", "units", "memo")

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.text, self.tree = text, tree
        attributes: dict[str, list[ast.Attribute]] = {}
        strings: set[str] = set()
        heads: set[str] = set()
        placed: set[str] = set()
        defs: set[str] = set()
        classes: list[ast.ClassDef] = []
        imported: set[str] = set()
        modules: set[str] = set()
        aliases: dict[str, set[str]] = {}
        AST, JoinedStr = ast.AST, ast.JoinedStr
        module_unit = Unit(None)
        units = [module_unit]
        top = []
        for statement in tree.body:
            if statement.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                unit = Unit(statement)
                units.append(unit)
            else:
                unit = module_unit
                unit.statements.append(statement)
            top.append((statement, unit))

        def place(value) -> None:
            t = value.__class__
            if t is _Constant:
                if value.value.__class__ is str:
                    placed.add(value.value)
            elif t is JoinedStr:
                if value.values and value.values[0].__class__ is _Constant:
                    placed.add(value.values[0].value)
            elif t is ast.IfExp:  # "cuda" if args.cuda else "cpu"
                place(value.body)
                place(value.orelse)
            elif t is ast.BinOp:  # "cuda:%d" % rank, "cuda:" + str(rank)
                place(value.left)
            elif t is _Call and value.func.__class__ is _Attribute and value.func.attr == "format":
                place(value.func.value)  # "cuda:{}".format(rank)

        for statement, unit in top:
            methods, functions, keywords = unit.methods, unit.functions, unit.keywords
            stack: list = [statement]
            pop, push, extend = stack.pop, stack.append, stack.extend
            while stack:
                node = pop()
                t = node.__class__
                if t is _Call:
                    func = node.func
                    if func.__class__ is _Attribute:
                        methods.setdefault(func.attr, []).append(node)
                    elif func.__class__ is _Name:
                        functions.setdefault(func.id, []).append(node)
                    for a in node.args:
                        place(a)
                    for kw in node.keywords:
                        if kw.arg is not None:
                            keywords.add(kw.arg)
                        place(kw.value)
                elif t is _Attribute:
                    attributes.setdefault(node.attr, []).append(node)
                elif t is _Constant:
                    if node.value.__class__ is str:
                        strings.add(node.value)
                    continue
                elif t is _Name:
                    continue
                elif t is ast.Assign or t is ast.AnnAssign:
                    if node.value is not None:
                        place(node.value)
                elif t is JoinedStr:
                    first = node.values[0] if node.values else None
                    if first is not None and first.__class__ is _Constant:
                        heads.add(first.value)
                elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
                    defs.add(node.name)
                    for default in (*node.args.defaults, *node.args.kw_defaults):
                        if default is not None:
                            place(default)
                elif t is ast.ClassDef:
                    classes.append(node)
                elif t is ast.Import:
                    for alias in node.names:
                        modules.add(alias.name)
                        if alias.asname:
                            aliases.setdefault(alias.asname, set()).add(alias.name)
                        else:
                            head = alias.name.split(".", 1)[0]
                            aliases.setdefault(head, set()).add(head)
                elif t is ast.ImportFrom:
                    if node.module and not node.level:
                        modules.add(node.module)
                        for alias in node.names:
                            if alias.name != "*":
                                full = f"{node.module}.{alias.name}"
                                imported.add(full)
                                aliases.setdefault(alias.asname or alias.name, set()).add(full)
                for field in t._fields:
                    value = getattr(node, field, None)
                    if value.__class__ is list:
                        extend([v for v in value if isinstance(v, AST)])
                    elif isinstance(value, AST):
                        push(value)
        self._settle(units, attributes, strings, heads, placed, defs, classes, imported, modules, aliases)

    @classmethod
    def joined(cls, parts: Sequence["Facts"], tree: ast.Module, text: str) -> "Facts | None":
        """The facts of ``tree`` (whose ``body`` is the concatenated bodies of the trees
        ``parts`` were built from, in order) without walking it again: what the language
        server's per-statement cache builds from the facts of each top-level statement, of
        which an edit changes one. Equals ``Facts(tree, text)`` slot for slot (lists and dict
        keys in the same order: each part's walk is the whole walk's over its statements);
        ``None`` when this class has a slot the join does not know (the caller then builds
        the facts whole)."""
        if set(cls.__slots__) != _JOINED:
            return None
        self = cls.__new__(cls)
        self.text, self.tree = text, tree
        module_unit = Unit(None)
        units = [module_unit]
        attributes: dict[str, list] = {}
        aliases: dict[str, set[str]] = {}
        classes: list = []
        strings, heads, placed, defs, imported, modules = set(), set(), set(), set(), set(), set()
        own_methods, own_functions = module_unit.methods, module_unit.functions
        for part in parts:
            first, *rest = part.units
            module_unit.statements.extend(first.statements)
            for table, merged in ((first.methods, own_methods), (first.functions, own_functions)):
                for key, items in table.items():
                    merged.setdefault(key, []).extend(items)
            module_unit.keywords |= first.keywords
            units.extend(rest)
            for key, items in part.attributes.items():
                attributes.setdefault(key, []).extend(items)
            for key, names in part.aliases.items():
                aliases.setdefault(key, set()).update(names)
            classes.extend(part.classes)
            strings |= part.strings
            heads |= part.fstring_heads
            placed |= part.placed
            defs |= part.defs
            imported |= part.imported
            modules |= part.modules
        self._settle(units, attributes, strings, heads, placed, defs, classes, imported, modules, aliases)
        return self

    def _settle(self, units, attributes, strings, heads, placed, defs, classes, imported, modules, aliases) -> None:
        """Set the slots from what a walk (or a join of walks) collected."""
        self.methods = _merged(u.methods for u in units)
        self.functions = _merged(u.functions for u in units)
        self.keywords = set().union(*(u.keywords for u in units))
        self.attributes, self.strings, self.fstring_heads, self.placed = attributes, strings, heads, placed
        self.defs, self.classes, self.imported, self.modules, self.aliases = defs, classes, imported, modules, aliases
        self.class_names = {c.name for c in classes}
        self.units = units
        #: what the predicates' helpers computed once for this file, by helper name
        self.memo: dict[str, object] = {}

    # -- queries -------------------------------------------------------------------------------
    def resolve(self, node: ast.AST | None) -> set[str]:
        """Every dotted name ``node`` (a Name/Attribute chain) may stand for through the file's
        imports (``T.cuda.Event`` -> ``{"torch.cuda.Event"}``); empty when its head was never
        imported. A superset of what :meth:`devlint.names.ImportTable.resolve` can say anywhere."""
        parts = []
        while node.__class__ is _Attribute:
            parts.append(node.attr)
            node = node.value
        if node.__class__ is not _Name:
            return set()
        heads = self.aliases.get(node.id)
        if not heads:
            return set()
        rest = ".".join(reversed(parts))
        return {f"{h}.{rest}" for h in heads} if rest else set(heads)

    def calls(self, *names: str) -> Iterable[ast.Call]:
        """Calls ``x.<name>(...)`` or ``<name>(...)`` for each of ``names``."""
        for name in names:
            yield from self.methods.get(name, _EMPTY)
            yield from self.functions.get(name, _EMPTY)

    def calls_to(self, dotted_names: Iterable[str]) -> list[ast.Call]:
        """Calls whose callee may resolve to one of ``dotted_names`` (``torch.load``...)."""
        wanted = set(dotted_names)
        found = []
        for last in {n.rsplit(".", 1)[-1] for n in wanted}:
            for call in self.calls(last):
                if self.resolve(call.func) & wanted:
                    found.append(call)
        return found

    def refers_to(self, dotted_names: Iterable[str]) -> bool:
        """Does any Name/Attribute chain (called or not) resolve to one of ``dotted_names``?"""
        wanted = set(dotted_names)
        for last in {n.rsplit(".", 1)[-1] for n in wanted}:
            for node in self.attributes.get(last, _EMPTY):
                if self.resolve(node) & wanted:
                    return True
            local = self.aliases.get(last)
            if local and local & wanted:
                return True
        return False


#: The slots :meth:`Facts.joined` fills: a slot added to :class:`Facts` without being joined
#: there makes it decline (the facts are then built whole), never give other facts.
_JOINED = frozenset({"text", "tree", "methods", "functions", "attributes", "strings", "fstring_heads", "placed",
                     "keywords", "defs", "classes", "class_names", "imported", "modules", "aliases", "units", "memo"})


def _merged(tables: Iterable[dict[str, list]]) -> dict[str, list]:
    merged: dict[str, list] = {}
    for table in tables:
        for key, items in table.items():
            if key in merged:
                merged[key] = merged[key] + items
            else:
                merged[key] = items
    return merged


def candidates(text: str, rules: Sequence[type], tree: ast.Module | None = None,
               facts: Facts | None = None) -> tuple[list[type], ast.Module | None]:
    """``(the rules that could report in this file, its stdlib ast or None)``.

    A rule whose ``candidate`` is ``None`` is always kept, and so is every rule when the
    stdlib cannot parse the text (libcst then reports the syntax error, as without the
    pre-check) or a predicate raises. ``facts``, the :class:`Facts` of ``tree`` if the caller
    has them (the language server joins them per statement), saves the walk."""
    if all(getattr(r, "candidate", None) is None for r in rules):
        return list(rules), tree
    if facts is not None and tree is None:
        tree = facts.tree
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return list(rules), None
    try:
        facts = Facts(tree, text) if facts is None else facts
    except (RecursionError, MemoryError):  # pragma: no cover - an iterative walk
        return list(rules), tree
    kept = []
    for rule in rules:
        test = getattr(rule, "candidate", None)
        try:
            keep = test is None or bool(test(facts))
        except Exception:  # noqa: BLE001 - a faulty predicate must not lose findings
            keep = True
        if keep:
            kept.append(rule)
    return kept, tree


# ---- where the device dataflow may see a CPU tensor (DEV113's pre-check) ----------------------

#: Displays the dataflow reads as a batch (``CPUB``) at most, never as one CPU tensor.
_DISPLAYS = (ast.Tuple, ast.List, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
#: Expressions the dataflow gives no kind at all (``_value`` has no branch for them; a string
#: literal is at most a CPU *device*; ``None``/``True``/``False`` are names never bound).
_KINDLESS = (ast.Constant, ast.JoinedStr, ast.Lambda, ast.BoolOp, ast.Set, ast.Await, ast.Yield, ast.YieldFrom,
             ast.NamedExpr)
#: ``torch.*`` prefixes whose calls the dataflow gives no tensor kind (``_library_call``).
_NO_TENSOR_PREFIXES = ("torch.optim", "torch.utils", "torch.cuda", "torch.distributed", "torch.backends")
_STEP_BUDGET = 20_000
_WRAPPERS = frozenset({"compile", "DistributedDataParallel", "FullyShardedDataParallel"})
_JOINS = frozenset({"stack", "cat", "concat", "concatenate", "vstack", "hstack", "dstack"})
#: ``torch.<short>`` calls ``DeviceFlow._library_call`` may read as a CPU tensor by themselves
_CPU_MAKING = frozenset(
    "zeros ones empty full arange range randn rand randint randperm eye linspace logspace normal bernoulli "
    "multinomial tril_indices triu_indices poisson tensor as_tensor from_numpy onnx.operators.shape_as_tensor "
    "Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor ShortTensor CharTensor "
    "ByteTensor BoolTensor".split()
)


def _placement(statement: ast.Expr):
    """For a statement ``<x>.to/cuda/cpu(...)`` whose ``x`` is a name or an attribute (which
    ``DeviceFlow.visit_Expr`` rebinds to the placed value), the class of ``x``; else ``None``."""
    call = statement.value
    if call.__class__ is _Call and call.func.__class__ is _Attribute and call.func.attr in ("to", "cuda", "cpu"):
        receiver = call.func.value.__class__
        if receiver is _Name or receiver is _Attribute:
            return receiver
    return None


class CpuFlow:
    """Over-approximates, on the stdlib ``ast`` of one class, where
    :class:`devlint.dataflow.DeviceFlow` may give a value the kind ``CPU`` (a CPU tensor) or
    ``CPUB`` (a batch of them) inside the class's methods.

    It follows ``DeviceFlow._value`` case by case but flow-insensitively: a local name may hold
    what any binding of it in the method holds (every binding that is not a plain assignment
    counts as unknown), ``self.<x>`` what any assignment of ``<name>.x`` in the class holds;
    outer frames lend no tensors (``DeviceFlow.lookup``). :meth:`quiet` is True only where the
    kind is surely neither; a cycle or anything unhandled counts as "may be"."""

    def __init__(self, facts: Facts, cls: ast.ClassDef) -> None:
        self.facts, self.cls = facts, cls
        self.helpers = facts.memo.get("top_functions")
        if self.helpers is None:
            self.helpers = facts.memo["top_functions"] = top_functions(facts)
        self._bindings: dict[int, dict[str, list]] = {}
        self._attrs: dict[str, list] | None = None
        self._memo: dict[tuple, bool] = {}
        self._busy: set[tuple] = set()
        self._assumed = self._steps = 0

    # -- bindings -------------------------------------------------------------------------------
    def _method_bindings(self, method: ast.AST) -> dict[str, list]:
        """name -> [(value, method) or None (a binding other than a plain assignment)]."""
        found = self._bindings.get(id(method))
        if found is not None:
            return found
        found = {}
        plain: set[int] = set()
        for node in walk(method):
            t = node.__class__
            if t is ast.Assign:
                for target in node.targets:
                    if target.__class__ is _Name:
                        found.setdefault(target.id, []).append((node.value, method))
                        plain.add(id(target))
            elif t is ast.AnnAssign or t is ast.AugAssign:
                if node.target.__class__ is _Name:
                    plain.add(id(node.target))
                    if node.value is not None:
                        found.setdefault(node.target.id, []).append((node.value, method))
            elif t is ast.Expr and _placement(node) is _Name:
                found.setdefault(node.value.func.value.id, []).append(None)  # `x.to(t)` rebinds x
            elif t is _Name and node.ctx.__class__ is not ast.Load and id(node) not in plain:
                found.setdefault(node.id, []).append(None)
            elif t in _CAPTURES and getattr(node, "name" if t is not ast.MatchMapping else "rest", None):
                found.setdefault(node.name if t is not ast.MatchMapping else node.rest, []).append(None)  # case {"x": x}
            elif t is ast.arg and node.arg in BATCH_PARAMS:
                found.setdefault(node.arg, []).append(None)  # def step(model, batch, device): a batch
        if method.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) and _moves_a_parameter(method):
            for arg in _parameters(method):  # def step(self, x, y): x moved, so y is an item too
                found.setdefault(arg, []).append(None)
        self._bindings[id(method)] = found
        return found

    def _attr_bindings(self) -> dict[str, list]:
        """attribute -> [(value, method) or None] over every method of the class."""
        if self._attrs is not None:
            return self._attrs
        found: dict[str, list] = {}
        methods = [s for s in walk(self.cls) if s.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef)]
        for method in methods:
            plain: set[int] = set()
            for node in walk(method):
                t = node.__class__
                if t is ast.Assign or t is ast.AnnAssign:
                    targets = node.targets if t is ast.Assign else [node.target]
                    for target in targets:
                        if target.__class__ is _Attribute:
                            plain.add(id(target))
                            if node.value is not None:
                                found.setdefault(target.attr, []).append((node.value, method))
                elif t is ast.AugAssign and node.target.__class__ is _Attribute:
                    plain.add(id(node.target))  # the dataflow binds augmented names only
                elif t is ast.Expr and _placement(node) is _Attribute:
                    found.setdefault(node.value.func.value.attr, []).append(None)  # `self.m.to(t)` rebinds it
                elif t is _Attribute and node.ctx.__class__ is not ast.Load and id(node) not in plain:
                    found.setdefault(node.attr, []).append(None)
        self._attrs = found
        return found

    def _no_summary(self, name: str) -> bool:
        """Is every module-level ``def name`` surely summarised as no CPU tensor or batch
        (``DeviceFlow.leave_FunctionDef``: a summary needs every ``return`` of the function's
        own body to give one, and one ``return`` at least)?"""
        key = ("summary", name)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy:
            return False
        self._busy.add(key)
        try:
            ok = True
            for statement in self.facts.tree.body:
                if statement.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) and statement.name == name:
                    returns = [r for r in own_nodes(statement) if r.__class__ is ast.Return]
                    ok = ok and (not returns or any(r.value is None or self.quiet(r.value, statement) for r in returns))
        finally:
            self._busy.discard(key)
        self._memo[key] = ok
        return ok

    def _all_quiet(self, key: tuple, bindings: list) -> bool:
        """Are all ``bindings`` of a name (or attribute) quiet? A name met again while its own
        bindings are being read is assumed quiet (``x = x.float()`` adds nothing: the dataflow
        only ever propagates kinds from a source, so the least fixpoint is the sound one); a
        result that rests on such an assumption is kept only where it cannot be wrong (a "may
        be", or the outermost name). Past a step budget, everything may be."""
        if key in self._memo:
            return self._memo[key]
        if key in self._busy:
            self._assumed += 1
            return True
        self._steps += 1
        if self._steps > _STEP_BUDGET:
            return False
        before = self._assumed
        self._busy.add(key)
        try:
            ok = all(b is not None and self.quiet(*b) for b in bindings)
        finally:
            self._busy.discard(key)
        if not ok or self._assumed == before or not self._busy:
            self._memo[key] = ok
        return ok

    @staticmethod
    def self_name(method: ast.AST) -> str | None:
        """The first positional parameter of a ``def`` (``self`` in a method), else ``None``."""
        if method.__class__ is not ast.FunctionDef and method.__class__ is not ast.AsyncFunctionDef:
            return None
        args = method.args
        positional = [*args.posonlyargs, *args.args]
        return positional[0].arg if positional else None

    # -- kinds ----------------------------------------------------------------------------------
    def not_cpu(self, expr: ast.AST, method: ast.AST) -> bool:
        """Surely not the kind ``CPU`` (a display may be a ``CPUB``)."""
        return expr.__class__ in _DISPLAYS or self.quiet(expr, method)

    def quiet(self, expr: ast.AST, method: ast.AST) -> bool:
        """Surely neither ``CPU`` nor ``CPUB`` in ``method`` (a method of the class)."""
        t = expr.__class__
        if t in _KINDLESS:
            return True
        if t is _Name:
            bindings = self._method_bindings(method).get(expr.id)
            return not bindings or self._all_quiet(("name", id(method), expr.id), bindings)
        if t is _Attribute:
            if not self.quiet(expr.value, method):
                return False
            if expr.value.__class__ is _Name and expr.value.id == self.self_name(method):
                bindings = self._attr_bindings().get(expr.attr)
                return not bindings or self._all_quiet(("attr", expr.attr), bindings)
            return True
        if t is ast.Subscript:
            return self.quiet(expr.value, method)
        if t is ast.BinOp or t is ast.Compare:
            operands = [expr.left, expr.right] if t is ast.BinOp else [expr.left, *expr.comparators]
            return self._quiet_combination(operands, method)
        if t is ast.UnaryOp:
            return self.not_cpu(expr.operand, method)
        if t is ast.IfExp:
            return self.quiet(expr.body, method) or self.quiet(expr.orelse, method)
        if t is _Call:
            return self._quiet_call(expr, method)
        return False

    def _quiet_call(self, call: ast.Call, method: ast.AST) -> bool:
        if any(kw.arg == "return_tensors" for kw in call.keywords):
            return False
        func = call.func
        last = (dotted(func) or "").rsplit(".", 1)[-1]
        positional = [a for a in call.args if a.__class__ is not ast.Starred]
        if last == "enumerate" and positional:
            return True
        if last == "zip" and positional and len(positional) == len(call.args):
            return True
        for name in self.facts.resolve(func):
            if not self._quiet_library(name, call, method):
                return False
        if func.__class__ is _Name:
            return func.id != "next" and (func.id not in self.helpers or self._no_summary(func.id))
        if func.__class__ is _Attribute:
            attr = func.attr
            if attr == "from_pretrained" or attr == "cuda":
                return True
            if attr in ("cpu", "to"):
                return False
            if attr == "type_as":
                return not call.args or self.not_cpu(call.args[0], method)
            return self.quiet(func.value, method)
        return True

    def _quiet_library(self, name: str, call: ast.Call, method: ast.AST) -> bool:
        """Does ``DeviceFlow._library_call(name, call)`` surely give neither CPU nor CPUB (or
        defer to the unresolved reading, which :meth:`_quiet_call` checks too)? Its cases, in
        its order."""
        last = name.rsplit(".", 1)[-1]
        if last == "DataLoader":
            return True
        if last == "TensorDataset":
            return False
        if not name.startswith("torch."):
            return True
        if name == "torch.device":
            return True
        if last in _WRAPPERS and (last != "compile" or name == "torch.compile"):
            return True
        short = name[6:]
        if last[:1].islower() and any(part[:1].isupper() for part in short.split(".")[:-1]):
            return True
        if short in _CPU_MAKING:
            return False  # factories, torch.tensor, legacy constructors, shape_as_tensor, torch.normal(...)
        positional = [a for a in call.args if a.__class__ is not ast.Starred]
        if short in _JOINS and call.args and not self._not_cpub(call.args[0], method):
            return False  # torch.stack(<a batch of CPU tensors>)
        if last.endswith("_like"):
            return False
        if name.startswith("torch.nn.") and last[:1].isupper() and (name.count(".") == 2 or name.startswith("torch.nn.modules.")):
            return True
        if name.startswith(_NO_TENSOR_PREFIXES):
            return True
        if last[:1].islower():  # the arguments combined (DeviceFlow._combine)
            operands = []
            for a in positional:
                if a.__class__ is ast.List or a.__class__ is ast.Tuple:
                    operands.extend(e.value if e.__class__ is ast.Starred else e for e in a.elts)
                else:
                    operands.append(a)
            return self._quiet_combination(operands, method)
        return True

    def _quiet_combination(self, operands: list, method: ast.AST) -> bool:
        """``DeviceFlow._combine``: a CPU tensor only if every operand it counts is one (numbers
        are never counted, ``<name>.<x>`` may be: a number held on ``self`` is not). Quiet when
        an operand surely counted is surely not a CPU tensor, or when no operand that may be
        counted may be one."""
        counted = [o for o in operands if not (o.__class__ is _Constant and not isinstance(o.value, (str, bytes)))]
        surely = [o for o in counted if not (o.__class__ is _Attribute and o.value.__class__ is _Name)]
        return any(self.not_cpu(o, method) for o in surely) or all(self.not_cpu(o, method) for o in counted)

    def _not_cpub(self, expr: ast.AST, method: ast.AST) -> bool:
        """Surely not the kind ``CPUB``: quiet, or a display with an item that is surely not a CPU
        tensor (``DeviceFlow._container`` and ``_comprehension`` need every item to be one)."""
        t = expr.__class__
        if t is ast.List or t is ast.Tuple:
            return any(e.__class__ is not ast.Starred and self.not_cpu(e, method) for e in expr.elts)
        if t is ast.Dict:
            return any(k is not None and self.not_cpu(v, method) for k, v in zip(expr.keys, expr.values))
        if t in (ast.ListComp, ast.SetComp, ast.GeneratorExp):
            return self.not_cpu(expr.elt, method)
        if t is ast.DictComp:
            return self.not_cpu(expr.value, method)
        return self.quiet(expr, method)


def _parameters(function: ast.AST) -> list[str]:
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def _moves_a_parameter(function: ast.AST) -> bool:
    """Does the ``def`` move one of its own parameters with ``.to(...)``/``.cuda(...)``
    (``DeviceFlow`` then takes its parameters for the items of one batch)?"""
    params = set(_parameters(function))
    for node in walk(function):
        if node.__class__ is _Call and node.func.__class__ is _Attribute and node.func.attr in ("to", "cuda"):
            receiver = node.func.value
            while receiver.__class__ in (_Attribute, ast.Subscript, _Call):
                receiver = receiver.func.value if receiver.__class__ is _Call and receiver.func.__class__ is _Attribute else getattr(receiver, "value", None)
            if receiver.__class__ is _Name and receiver.id in params:
                return True
    return False
