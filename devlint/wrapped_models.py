"""Which models a file wraps in ``nn.DataParallel``, which scatters CPU inputs to the GPUs itself.

A call that reaches a model through ``nn.DataParallel`` may take its inputs where they are, so
DEV111 reads no evidence of a partly moved batch there. Only there: a file that wraps one model
still feeds its other models, and the model it unwraps again (``m = m.module``), as any other.

:class:`WrappedModels` scans one module once. A target is *wrapped* when some assignment binds
it to ``DataParallel(...)`` (also ``.to(d)``/``.cuda()``/``.eval()`` of one, either arm of a
conditional expression, an alias of a wrapped target, a call of a function of this file that
returns one), or when a call of a function of this file passes one as its parameter. Targets
are local names (per function, with Python's scoping, ``global`` included), ``self.<attr>`` of
a class and the classes of this file it derives from or that derive from it, and other dotted
names by their text. A wrapper unwrapped at once (``DataParallel(m).module``, or ``m =
m.module`` as the next statement) wraps nothing. The analysis is flow-insensitive: a target
wrapped anywhere (on one arm of an ``if``) is taken as wrapped at every call, as the silence
the rule keeps for a model it cannot place.
"""

from __future__ import annotations

import libcst as cst

from .names import dotted

#: methods of a module that return the same module (still the wrapper)
_KEEPING = frozenset("to cuda cpu float half double bfloat16 train eval requires_grad_ share_memory".split())


def scattering_wrapper(call: cst.Call) -> bool:
    """``nn.DataParallel(m)``, ``torch.nn.parallel.DataParallel(m)``, a subclass named like it
    (``BalancedDataParallel``); not ``DistributedDataParallel``, which scatters nothing."""
    name = dotted(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    return last.endswith("DataParallel") and not last.endswith("DistributedDataParallel")


def mentions_wrapper(text: str) -> bool:
    """Does ``text`` call a ``DataParallel`` (not ``DistributedDataParallel``) anywhere?"""
    return "DataParallel(" in text.replace("DistributedDataParallel(", "")


class _Scope:
    """A module or function body: its node, the enclosing scope, the class family of its
    ``self`` (``None`` outside a method), the name of ``self``, and its local names."""

    __slots__ = ("node", "parent", "family", "self_name", "locals", "globals")

    def __init__(self, node, parent, family, self_name) -> None:
        self.node, self.parent, self.family, self.self_name = node, parent, family, self_name
        self.locals: set[str] = set()
        self.globals: set[str] = set()


class WrappedModels:
    """The wrapped targets of one module (see the module docstring)."""

    def __init__(self, module: cst.Module | None) -> None:
        self._keys: set[tuple] = set()
        self._scopes: dict[int, _Scope] = {}
        self._bindings: list[tuple[tuple, cst.BaseExpression, _Scope]] = []
        self._calls: list[tuple[cst.Call, _Scope]] = []
        self._reads: dict[int, list[cst.BaseExpression]] = {}
        self._defs: dict[str, list[tuple[cst.FunctionDef, bool]]] = {}
        self._classes: dict[str, cst.ClassDef] = {}
        self._family: dict[str, str] = {}
        self._methods: dict[str, set[str]] = {}
        self._users: set[int] = set()
        self._module_scope = None
        if module is None:
            return
        self._module_scope = _Scope(module, None, None, None)
        self._scopes[id(module)] = self._module_scope
        self._collect_classes(module)
        self._walk_block(module.body, self._module_scope, None)
        self._settle()

    # ---- queries ------------------------------------------------------------------------
    def wrapped(self, expr: cst.BaseExpression | None, frame) -> bool:
        """Is ``expr``, read in the flow's ``frame``, a model wrapped in ``DataParallel``?"""
        if expr is None or not self._keys:
            return False
        return self._is_wrapped(expr, self._scope_of(frame))

    def reaches(self, call: cst.Call, frame) -> bool:
        """May ``call``, in the flow's ``frame``, hand its arguments to a wrapped model: it calls
        one (``dp(x)``, ``dp.forward(x)``), is given one, runs a function of this file that
        reaches one, or is a held object or an inherited method of a class that keeps one?"""
        if not self._keys:
            return False
        scope = self._scope_of(frame)
        func = call.func
        if any(self._is_wrapped(a.value, scope) for a in call.args) or self._is_wrapped(func, scope):
            return True
        if func.__class__ is cst.Attribute and self._is_wrapped(func.value, scope):
            return True
        if any(id(d) in self._users for d, _ in self._callees(call, scope)):
            return True
        if func.__class__ is cst.Attribute and self._on_self(func.value, scope):
            family = scope.family
            held = family is not None and func.attr.value not in self._methods.get(family, ())
            return held and any(k[0] == "self" and k[1] == family for k in self._keys)
        return False

    # ---- scanning -----------------------------------------------------------------------
    def _collect_classes(self, module: cst.Module) -> None:
        """Class families: the classes of this file joined through the bases they name."""
        classes = []
        stack = list(module.body)
        while stack:
            node = stack.pop()
            if node.__class__ is cst.ClassDef:
                classes.append(node)
                self._classes.setdefault(node.name.value, node)
            if isinstance(node, (cst.ClassDef, cst.FunctionDef, cst.If, cst.Try, cst.With, cst.For, cst.While)):
                stack.extend(_statements(node))
        parent = {c.name.value: c.name.value for c in classes}

        def root(name: str) -> str:
            while parent[name] != name:
                name = parent[name]
            return name

        for c in classes:
            for base in c.bases:
                name = (dotted(base.value) or "").rsplit(".", 1)[-1]
                if name in parent:
                    parent[root(c.name.value)] = root(name)
        for c in classes:
            family = root(c.name.value)
            self._family[c.name.value] = family
            self._methods.setdefault(family, set()).update(
                s.name.value for s in _statements(c) if s.__class__ is cst.FunctionDef)

    def _walk_block(self, statements, scope: _Scope, cls: str | None) -> None:
        """Record the bindings, calls and reads of a block's statements (and nested blocks)."""
        flat = []
        for statement in statements:
            if statement.__class__ is cst.SimpleStatementLine:
                flat.extend(statement.body)
            else:
                flat.append(statement)
        for i, node in enumerate(flat):
            if node.__class__ is cst.FunctionDef:
                self._walk_function(node, scope, cls)
                continue
            if node.__class__ is cst.ClassDef:
                for s in _statements(node):
                    if s.__class__ is cst.FunctionDef:
                        self._walk_function(s, scope, node.name.value)
                continue
            if node.__class__ is cst.Global:
                scope.globals.update(n.name.value for n in node.names)
                continue
            if node.__class__ is cst.Assign and not _unwrapped_next(node, flat[i + 1] if i + 1 < len(flat) else None):
                for target in node.targets:
                    self._bind(target.target, node.value, scope)
            elif node.__class__ is cst.AnnAssign and node.value is not None:
                self._bind(node.target, node.value, scope)
            elif node.__class__ is cst.Return and node.value is not None and scope.node.__class__ is cst.FunctionDef:
                self._bindings.append((("ret", id(scope.node)), node.value, scope))
            elif node.__class__ is cst.For:
                self._local_names(node.target, scope)
            self._expressions(node, scope)
            nested = _statements(node)
            if nested:
                self._walk_block(nested, scope, cls)

    def _walk_function(self, node: cst.FunctionDef, parent: _Scope, cls: str | None) -> None:
        params = node.params
        positional = [*params.posonly_params, *params.params]
        static = any(dotted(d.decorator) in ("staticmethod", "classmethod") for d in node.decorators)
        self_name = positional[0].name.value if cls is not None and positional and not static else None
        scope = _Scope(node, parent, self._family.get(cls) if cls is not None else None, self_name)
        for p in (*positional, *params.kwonly_params):
            scope.locals.add(p.name.value)
        for star in (params.star_arg, params.star_kwarg):
            if star.__class__ is cst.Param:
                scope.locals.add(star.name.value)
        self._scopes[id(node)] = scope
        self._reads[id(node)] = []
        self._defs.setdefault(node.name.value, []).append((node, cls is not None and not static))
        self._walk_block(_statements(node), scope, None)
        scope.locals -= scope.globals

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression, scope: _Scope) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                for t, v in zip(target.elements, value.elements):
                    self._bind(t.value, v.value, scope)
            else:  # model, opt = setup(...): each name may be the wrapper the call returns
                for t in target.elements:
                    self._bind(t.value, value, scope)
            return
        if target.__class__ is cst.StarredElement:
            target = target.value
        if target.__class__ is cst.Subscript:
            target = target.value  # self.nets["g"] = DataParallel(g): the container holds a wrapper
        key = self._key(target, scope, binding=True)
        if key is not None:
            self._bindings.append((key, value, scope))

    def _local_names(self, target: cst.BaseExpression, scope: _Scope) -> None:
        if target.__class__ is cst.Name:
            scope.locals.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self._local_names(e.value, scope)
        elif target.__class__ is cst.StarredElement:
            self._local_names(target.value, scope)

    def _expressions(self, statement: cst.CSTNode, scope: _Scope) -> None:
        """Record the calls of a statement (not of its nested blocks) and, in a function, the
        names and attributes it reads; ``with ... as m`` binds ``m`` locally."""
        reads = self._reads.get(id(scope.node))
        stack = [c for c in statement.children if not isinstance(c, (cst.BaseSuite, cst.BaseCompoundStatement))]
        if statement.__class__ is cst.If or statement.__class__ is cst.While:
            stack = [statement.test]
        elif statement.__class__ is cst.For:
            stack = [statement.iter]
        elif statement.__class__ is cst.With:
            stack = list(statement.items)
        elif isinstance(statement, (cst.Try, cst.FunctionDef, cst.ClassDef)):
            stack = []
        while stack:
            node = stack.pop()
            if node.__class__ is cst.AsName:
                self._local_names(node.name, scope)
                continue
            if node.__class__ is cst.Call:
                self._calls.append((node, scope))
            if node.__class__ is cst.Attribute and node.attr.value == "module":
                continue  # model.module: the wrapped model itself, no wrapper
            if reads is not None and node.__class__ in (cst.Name, cst.Attribute):
                reads.append(node)
                if node.__class__ is cst.Name:
                    continue
            if node.__class__ is not cst.Lambda:
                stack.extend(node.children)

    def _key(self, target: cst.BaseExpression, scope: _Scope, binding: bool = False) -> tuple | None:
        """The key of a target written or read in ``scope``; for a read name, the scope it
        resolves to (``None`` where no key applies)."""
        if target.__class__ is cst.Name:
            name = target.value
            if binding:
                if name in scope.globals:
                    return ("name", id(self._module_scope.node), name)
                scope.locals.add(name)
                return ("name", id(scope.node), name)
            s = scope
            while s is not None:
                if (name in s.locals and name not in s.globals) or s.parent is None:
                    return ("name", id(s.node), name)
                s = s.parent
            return None
        if target.__class__ is cst.Attribute:
            if self._on_self(target.value, scope):
                return ("self", scope.family, target.attr.value)
            text = dotted(target)
            return ("text", text) if text is not None else None
        return None

    @staticmethod
    def _on_self(expr: cst.BaseExpression, scope: _Scope) -> bool:
        return expr.__class__ is cst.Name and scope.self_name is not None and expr.value == scope.self_name

    def _is_wrapped(self, expr: cst.BaseExpression, scope: _Scope) -> bool:
        if expr.__class__ is cst.IfExp:
            return self._is_wrapped(expr.body, scope) or self._is_wrapped(expr.orelse, scope)
        while expr.__class__ is cst.Call and expr.func.__class__ is cst.Attribute and expr.func.attr.value in _KEEPING:
            expr = expr.func.value  # DataParallel(m).to(d), dp.cuda()
        if expr.__class__ is cst.Call:
            if scattering_wrapper(expr):
                return True
            return any(("ret", id(d)) in self._keys for d, _ in self._callees(expr, scope))
        if expr.__class__ is cst.Subscript:
            expr = expr.value
        if expr.__class__ is cst.Attribute and expr.attr.value == "module":
            return False
        key = self._key(expr, scope)
        return key is not None and key in self._keys

    def _callees(self, call: cst.Call, scope: _Scope) -> list[tuple[cst.FunctionDef, bool]]:
        """The ``def``s of this file ``call`` may run, each with whether it is a method (whose
        first parameter the call does not pass): a function by its name (a class's
        ``__init__``), ``self.m(...)`` among the family's methods, ``obj.m(...)`` any method m."""
        func = call.func
        if func.__class__ is cst.Name:
            name = func.value
            if name in self._classes:
                return [(d, m) for d, m in self._defs.get("__init__", ()) if m and self._owner(d) == self._family.get(name)]
            return [(d, m) for d, m in self._defs.get(name, ()) if not m]
        if func.__class__ is cst.Attribute:
            methods = [(d, m) for d, m in self._defs.get(func.attr.value, ()) if m]
            if self._on_self(func.value, scope):
                return [(d, m) for d, m in methods if self._owner(d) == scope.family]
            return methods
        return []

    def _owner(self, function: cst.FunctionDef) -> str | None:
        scope = self._scopes.get(id(function))
        return scope.family if scope is not None else None

    def _settle(self) -> None:
        """Wrapped targets to a fixed point (aliases, parameters, returns), then the functions
        of this file that reach a wrapped model, directly or through each other."""
        for _ in range(8):
            before = len(self._keys)
            for key, value, scope in self._bindings:
                if key not in self._keys and self._is_wrapped(value, scope):
                    self._keys.add(key)
            for call, scope in self._calls:
                for arg in call.args:
                    if self._is_wrapped(arg.value, scope):
                        for function, method in self._callees(call, scope):
                            for param in _landing(function, method, call, arg):
                                self._keys.add(("name", id(function), param))
            if len(self._keys) == before:
                break
        if not self._keys:
            return
        for node_id, reads in self._reads.items():
            scope = self._scopes[node_id]
            if any(self._is_wrapped(r, scope) for r in reads):
                self._users.add(node_id)
        by_scope: dict[int, list[cst.Call]] = {}
        for call, scope in self._calls:
            if scope.node.__class__ is cst.FunctionDef:
                by_scope.setdefault(id(scope.node), []).append(call)
        for _ in range(8):
            before = len(self._users)
            for node_id, calls in by_scope.items():
                scope = self._scopes[node_id]
                if node_id not in self._users and any(
                        id(d) in self._users for c in calls for d, _ in self._callees(c, scope)):
                    self._users.add(node_id)
            if len(self._users) == before:
                break

    def _scope_of(self, frame) -> _Scope:
        """The scope of the flow's frame (its function node), or the module's."""
        node = getattr(frame, "node", None)
        scope = self._scopes.get(id(node)) if node is not None else None
        return scope or self._module_scope


def _statements(node: cst.CSTNode) -> list:
    """The statements of a compound statement's blocks (both arms of an ``if``, a ``try``'s
    handlers, ``else`` and ``finally``), or of a module; ``[]`` for a simple statement."""
    if node.__class__ is cst.Module:
        return list(node.body)
    out = []
    for child in node.children:
        if isinstance(child, cst.BaseSuite):
            out.extend(child.body)
        elif isinstance(child, (cst.If, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)):
            out.extend(_statements(child))
    return out


def _unwrapped_next(node: cst.Assign, following) -> bool:
    """``m = DataParallel(m)`` followed at once by ``m = m.module``: the wrapper is dropped."""
    if len(node.targets) != 1 or following is None or following.__class__ is not cst.Assign or len(following.targets) != 1:
        return False
    text = dotted(node.targets[0].target)
    value = following.value
    return (text is not None and dotted(following.targets[0].target) == text and value.__class__ is cst.Attribute
            and value.attr.value == "module" and dotted(value.value) == text)


def _landing(function: cst.FunctionDef, method: bool, call: cst.Call, arg: cst.Arg) -> list[str]:
    """The parameters of ``function`` that ``arg`` of ``call`` may land on."""
    params = [*function.params.posonly_params, *function.params.params]
    if method:
        params = params[1:]
    names = [p.name.value for p in params]
    if arg.star == "**":
        return names + [p.name.value for p in function.params.kwonly_params]
    if arg.keyword is not None:
        return [arg.keyword.value]
    positional = [a for a in call.args if a.keyword is None]
    index = positional.index(arg)
    if arg.star or any(a.star for a in positional[:index]):
        return names[index:] if not any(a.star for a in positional[:index]) else names
    return [names[index]] if index < len(names) else []
