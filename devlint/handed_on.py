"""The optional parameters of a function that it only hands on (``lang_id=lang_id``), counted
per statement of its body so that an edit counts again only the statements it made."""

from __future__ import annotations

import dataclasses
from typing import Callable

import libcst as cst


def _node_fields(kind: type) -> tuple[str, ...]:
    """The dataclass fields of a libcst node type (every child a ``CSTVisitor`` visits)."""
    found = _NODE_FIELDS.get(kind)
    if found is None:
        found = _NODE_FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return found


def _is_node(kind: type) -> bool:
    """Is ``kind`` a libcst node type? (Asked once per type: ``isinstance`` on libcst's abstract
    base costs a registry lookup per call.)"""
    found = _IS_NODE.get(kind)
    if found is None:
        found = _IS_NODE[kind] = isinstance(kind, type) and issubclass(kind, cst.CSTNode)
    return found


_NODE_FIELDS: dict[type, tuple[str, ...]] = {}
_IS_NODE: dict[type, bool] = {}


def name_counts(root: cst.CSTNode, remembered: Callable | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """(how many times each name occurs below ``root``, how many times each is handed on as
    ``name=name``, its keyword's own ``Name`` counted in the first): one walk of every node (a
    plain stack over the nodes' fields: a libcst visitor cost ten times as much). A pure
    function of the immutable node; with ``remembered``, the counts of each statement of an
    indented block below ``root`` are kept between lints (a block's own fields hold no name)."""
    reads: dict[str, int] = {}
    handed_on: dict[str, int] = {}
    stack: list = [root]
    while stack:  # every node below the root, as a libcst visitor sees them, without its dispatch
        node = stack.pop()
        kind = node.__class__
        if kind is cst.IndentedBlock and remembered is not None:
            for statement in node.body:
                counted, handed = remembered("name-counts", statement,
                                             lambda statement=statement: name_counts(statement, remembered))
                for name, count in counted.items():
                    reads[name] = reads.get(name, 0) + count
                for name, count in handed.items():
                    handed_on[name] = handed_on.get(name, 0) + count
            continue
        if kind is cst.Name:
            reads[node.value] = reads.get(node.value, 0) + 1
            continue
        if kind is cst.Arg and node.keyword is not None:
            name = node.keyword.value
            if node.value.__class__ is cst.Name and node.value.value == name:
                handed_on[name] = handed_on.get(name, 0) + 1
        for field in _node_fields(kind):
            value = getattr(node, field)
            cls = value.__class__
            if cls is tuple or cls is list:
                stack.extend(v for v in value if _is_node(v.__class__))
            elif _is_node(cls):
                stack.append(value)
    return reads, handed_on


def handed_on_only(function: cst.FunctionDef, remembered: Callable | None = None) -> set[str]:
    """The optional parameters only handed on as ``name=name`` (``lang_id=lang_id`` in
    fairseq's xmod hub interface): options passed through, not items of the batch, since
    nothing in the function treats them as tensors; only for a function that has an optional
    parameter. ``remembered`` (:meth:`devlint.context.Context.remembered`) keeps the counts of
    each statement of the body between lints of one document."""
    params = function.params
    optional = {
        p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)
        if p.default.__class__ is cst.Name and p.default.value == "None"  # the only default _may_be_item takes
    }
    if not optional:
        return set()
    counted, handed = name_counts(function.body, remembered)
    return {n for n in optional if handed.get(n, 0) and counted.get(n, 0) == 2 * handed[n]}
