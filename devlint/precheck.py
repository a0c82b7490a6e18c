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

from .precheck_cpu_flow import CpuFlow
from .precheck_predicates import (arguments, builds_module, calls_in, dotted, has_backward, may_move,
                                  methods_of, module_class, own_nodes, resolves_to, strip_module_methods,
                                  top_functions, torch_dtype, unit_may_move, walk)

#: The rules import the shared predicates from here too (they live in ``precheck_predicates``).
__all__ = ["Unit", "Facts", "candidates", "CpuFlow", "arguments", "builds_module", "calls_in", "dotted",
           "has_backward", "may_move", "methods_of", "module_class", "own_nodes", "resolves_to",
           "strip_module_methods", "top_functions", "torch_dtype", "unit_may_move", "walk"]

_Attribute, _Name, _Call, _Constant = ast.Attribute, ast.Name, ast.Call, ast.Constant
_EMPTY: tuple = ()


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
