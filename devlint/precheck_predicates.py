"""The facts of a file's stdlib ``ast`` (:class:`Facts`, one :class:`Unit` per top-level
definition) and the shared predicates the rules' pre-checks ask of them.

Small questions asked of one node or one :class:`Unit` of the file's stdlib
``ast`` (a dotted name, a call's arguments, a class's methods, could a call move a value to an
accelerator, could an expression build an ``nn.Module``), shared by the ``candidate``
predicates in the rules' files and by :mod:`devlint.precheck_cpu_flow`. Each over-approximates
what the libcst analyses it stands for would find (named in each docstring).
"""

from __future__ import annotations

import ast
import re
from collections import deque
from typing import Iterable, Sequence


_Attribute, _Name, _Call, _Constant = ast.Attribute, ast.Name, ast.Call, ast.Constant

def dotted(node: ast.AST | None) -> str | None:
    """``a.b.c`` for an ``ast`` Name/Attribute chain, else ``None``."""
    parts = []
    while node.__class__ is _Attribute:
        parts.append(node.attr)
        node = node.value
    if node.__class__ is not _Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def arguments(call: ast.Call) -> list[ast.AST]:
    """The argument expressions of a call, positional then keyword (``*a``/``**k`` included,
    ``*a`` as ``a``, as libcst's ``Arg.value`` has it)."""
    return [*(a.value if a.__class__ is ast.Starred else a for a in call.args), *(kw.value for kw in call.keywords)]


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def methods_of(cls: ast.ClassDef, name: str) -> list[ast.AST]:
    """The ``def name`` statements of a class body, also under an ``if``/``try``/``with``/loop
    there (the engine's scopes count those as methods too), not inside a nested def or class."""
    found, stack = [], list(cls.body)
    while stack:
        s = stack.pop()
        t = s.__class__
        if t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            if s.name == name:
                found.append(s)
        elif t is not ast.ClassDef:
            for field in _BLOCKS:
                stack.extend(getattr(s, field, ()) or ())
    return found


def walk(node: ast.AST) -> Iterable[ast.AST]:
    """Every node under ``node`` (itself included), in the order of ``ast.walk`` (breadth
    first), each node's children read inline: ``ast.walk``'s two generators per node
    (``iter_child_nodes``, ``iter_fields``) cost ~1.7x this on timm + accelerate."""
    todo = deque((node,))
    popleft, append, AST = todo.popleft, todo.append, ast.AST
    while todo:
        node = popleft()
        for field in node._fields:
            value = getattr(node, field, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, AST):
                        append(item)
            elif isinstance(value, AST):
                append(value)
        yield node


def nodes_under(node: ast.AST, facts: Facts) -> list[ast.AST]:
    """``list(walk(node))``, kept in ``facts.memo`` for the file: the predicates walk the same
    ``__init__`` and ``forward`` several times (DEV113, DEV114, DEV116, :class:`CpuFlow`)."""
    kept = facts.memo.get("nodes_under")
    if kept is None:
        kept = facts.memo["nodes_under"] = {}
    found = kept.get(id(node))
    if found is None:
        found = kept[id(node)] = list(walk(node))
    return found


def has_backward(facts: Facts) -> bool:
    """A ``.backward(...)`` call or one of ``torch.autograd.backward``."""
    return "backward" in facts.methods or bool(facts.calls_to({"torch.autograd.backward"}))


#: Methods of a module that return it (``devlint.modules.MODULE_METHODS`` and the dataflow's).
_MODULE_METHODS = frozenset(
    {"to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16", "requires_grad_", "share_memory"}
)


def strip_module_methods(expr: ast.AST) -> ast.AST:
    """``nn.Linear(2, 2).to(device).eval()`` -> ``nn.Linear(2, 2)`` (stdlib ``ast``)."""
    while expr.__class__ is _Call and expr.func.__class__ is _Attribute and expr.func.attr in _MODULE_METHODS:
        expr = expr.func.value
    return expr


def builds_module(expr: ast.AST, facts: Facts) -> bool:
    """Could ``expr`` build an ``nn.Module`` (:func:`devlint.modules.is_module_constructor`, the
    dataflow's ``MODEL``): a call of a capitalised name (``nn.Linear``, a class) or of a class
    of the file, ``from_pretrained``, ``create_model``, a ``torchvision.models`` function,
    through module methods (``.to(device).eval()``)?"""
    expr = strip_module_methods(expr)
    if expr.__class__ is not _Call:
        return False
    name = dotted(expr.func) or ""
    last = name.rsplit(".", 1)[-1]
    if last[:1].isupper() or last in ("from_pretrained", "create_model") or last in facts.class_names:
        return True
    return any(n.startswith("torchvision.models.") for n in facts.resolve(expr.func))


def module_class(cls: ast.ClassDef, facts: Facts) -> bool:
    """Could this class be an ``nn.Module`` (:func:`devlint.modules.is_module_base`): a base
    named ``*Module``/``*Model``/``*Loss`` or for a class of the file, or from ``torch.nn``, or
    a ``forward`` method (:func:`devlint.modules.is_module_class`; any base here)?"""
    if cls.bases and any(s.__class__ is ast.FunctionDef and s.name == "forward" for s in cls.body):
        return True
    for base in cls.bases:
        last = (dotted(base) or "").rsplit(".", 1)[-1]
        if last.endswith(("Module", "Model", "Loss")) or last in facts.class_names:
            return True
        if any(n.startswith("torch.nn") for n in facts.resolve(base)):
            return True
    return False




def top_functions(facts: Facts) -> set[str]:
    """Names of the module-level ``def`` s (the functions the dataflow summarises)."""
    return {s.name for s in facts.tree.body if s.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef)}


def resolves_to(call: ast.Call, facts: Facts, names: frozenset[str]) -> bool:
    """May the callee of ``call`` resolve to one of ``names`` through the file's imports?"""
    return not facts.resolve(call.func).isdisjoint(names)


def torch_dtype(expr: ast.AST, facts: Facts, dtypes: frozenset[str]) -> bool:
    """Is ``expr`` spelled ``torch.<dtype>`` (``torch.float16``) where every import of the file
    binds that head to ``torch``, one of them a top-level ``import`` (so that the engine's import
    table knows it before any use) and no top-level ``def``/``class`` shadows it?"""
    if expr.__class__ is not _Attribute or expr.value.__class__ is not _Name or expr.attr not in dtypes:
        return False
    return expr.value.id in torch_heads(facts)


def torch_heads(facts: Facts) -> set[str]:
    """The local names that surely stand for ``torch`` where the engine resolves names: every
    import of the file binds them to ``torch``, one of them a top-level ``import``, and no
    top-level ``def``/``class`` shadows them (computed once per file)."""
    heads = facts.memo.get("torch_heads")
    if heads is None:
        bound, shadowed = set(), set()
        for statement in facts.tree.body:
            t = statement.__class__
            if t is ast.Import:
                bound.update(a.asname or a.name.split(".", 1)[0] for a in statement.names)
            elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                shadowed.add(statement.name)
        heads = facts.memo["torch_heads"] = {h for h in bound - shadowed if facts.aliases.get(h) == {"torch"}}
    return heads


def surely_guarded_calls(facts: Facts, helper, availability: frozenset[str]) -> set[int]:
    """``id`` of every call in the body of an ``if``/``elif`` whose test surely guards it as
    :func:`devlint.guards.polarity` reads a test (``+1``): a call of a helper whose last name
    ``helper`` (:data:`devlint.guards._HELPER`) matches (``is_cuda_available()``), or of
    ``<torch>.<x>`` with ``torch.<x>`` in ``availability`` through a head that every import
    binds to ``torch`` (see :func:`torch_dtype`), alone or as an operand of ``and``. Calls in a
    ``def``, ``class`` or ``lambda`` nested in that body are left out (the rule's guard is
    counted per block). An under-approximation: a call not in the set may be guarded too."""
    heads = torch_heads(facts)

    def sure(test) -> bool:
        if test.__class__ is ast.BoolOp and test.op.__class__ is ast.And:
            return any(sure(v) for v in test.values)
        if test.__class__ is not _Call:
            return False
        name = dotted(test.func)
        if name is None:
            return False
        if helper.match(name.rsplit(".", 1)[-1]):
            return True
        head, _, rest = name.partition(".")
        return head in heads and f"torch.{rest}" in availability

    found: set[int] = set()
    for node in walk(facts.tree):
        if node.__class__ is not ast.If or not sure(node.test):
            continue
        stack = list(node.body)
        while stack:
            inner = stack.pop()
            t = inner.__class__
            if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
                continue
            if t is _Call:
                found.add(id(inner))
            stack.extend(ast.iter_child_nodes(inner))
    return found


def may_move(call: ast.Call, facts: Facts | None = None, dtypes: frozenset[str] = frozenset()) -> bool:
    """Could ``<x>.cuda(...)``/``<x>.to(...)`` put ``x`` on an accelerator as
    :meth:`devlint.dataflow.DeviceFlow._placed` reads it: ``.cuda()``, or ``.to`` with a
    target that is not the literal ``"cpu"`` nor spelled like a dtype (``x.dtype``,
    ``torch.float16``)?"""
    func = call.func
    if func.__class__ is not _Attribute:
        return False
    if func.attr == "cuda":
        return True
    if func.attr != "to":
        return False
    target = next((a for a in call.args if a.__class__ is not ast.Starred), None)
    if target is None:
        target = next((kw.value for kw in call.keywords if kw.arg == "device"), None)
    if target is None:
        return False
    if target.__class__ is _Constant and target.value == "cpu":
        return False
    if facts is not None and torch_dtype(target, facts, dtypes):
        return False
    name = dotted(target) or ""
    return not name.endswith("dtype")


def calls_in(unit: Unit, root: ast.AST) -> Iterable[tuple[ast.Call, ast.AST]]:
    """``(call, the innermost def holding it, else root)`` for every call of the unit (the
    children of a node in ``ast.iter_child_nodes`` order, read inline: that generator was most
    of the cost on a file of 100k calls)."""
    stack = [(statement, root) for statement in reversed(unit.statements)]
    pop, push, AST = stack.pop, stack.append, ast.AST
    while stack:
        node, context = pop()
        t = node.__class__
        if t is _Call:
            yield node, context
        elif t is _Name or t is _Constant:
            continue  # no call below
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            context = node
        for field in t._fields:
            value = getattr(node, field, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, AST):
                        push((item, context))
            elif isinstance(value, AST):
                push((value, context))


def unit_may_move(unit: Unit, facts: Facts, dtypes: frozenset[str]) -> bool:
    """Could the unit make a value on an accelerator: a :func:`may_move` call or a ``device=``
    keyword (a factory on a device)? Kept in ``facts.memo`` (several predicates ask)."""
    if "device" in unit.keywords:
        return True
    kept = facts.memo.setdefault("unit_may_move", {})
    key = (id(unit), dtypes)  # the facts keep the unit: its id stays its own
    found = kept.get(key)
    if found is None:
        found = kept[key] = any(may_move(c, facts, dtypes) for c in unit.calls("to", "cuda"))
    return found


#: every augmented assignment's operator (``//=`` and ``**=`` end in ``/=`` and ``*=``)
_AUGMENTED = re.compile(r"(?:[-+*/%&|^@]|<<|>>)=")


def may_augment(facts: Facts) -> bool:
    """May the file hold an augmented assignment (``x += e``)? Its text holds the operator
    then; a file without one need not walk its statements for ``ast.AugAssign``."""
    return _AUGMENTED.search(facts.text) is not None


def own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a ``def``'s own body: nested ``def``/``class``/``lambda`` bodies left out."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        t = node.__class__
        if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))


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
            yield from walk(statement)

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
