"""What is an ``nn.Module``: class bases and constructor calls, shared by the rules and
analyses that need to tell a model from a tensor (DEV103, DEV11x, DEV208)."""

from __future__ import annotations

import libcst as cst

from .names import dotted

#: Methods of a module that return the module itself (``nn.Linear(2, 2).to(device).eval()``).
MODULE_METHODS = frozenset({"to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16", "requires_grad_"})
_NOT_MODULES = ("Parameter", "Buffer", "UninitializedParameter")
_LIGHTNING = ("lightning.LightningModule", "pytorch_lightning.LightningModule", "lightning.pytorch.LightningModule")


def is_module_base(expr: cst.BaseExpression, ctx, local_modules: set[str]) -> bool:
    """Is a class base ``nn.Module`` (or another ``torch.nn`` class, a module class of this
    file, Lightning's ``LightningModule``, or an imported class named ``*Module``/``*Model``/
    ``*Loss``)?"""
    name = ctx.resolve(expr) or ""
    if name.startswith("torch.nn.") or name == "torch.nn" or name in _LIGHTNING:
        return True
    last = (dotted(expr) or "").rsplit(".", 1)[-1]
    if last in local_modules or last.endswith(("Module", "Model", "Loss")):
        return True
    project = getattr(ctx, "project", None)  # a module class of another file (devlint.project)
    return project is not None and project.module_class(expr, ctx.names) is not None


def is_module_class(node: cst.ClassDef, ctx, local_modules: set[str]) -> bool:
    """Is this class an ``nn.Module``: a base for which :func:`is_module_base` holds, or a
    ``forward`` method and a base imported from outside torch (the project's own module base
    in another file: ``from .base import Tagger`` then ``class BiGRU(Tagger)``; a
    ``torch.autograd.Function`` also has a ``forward`` and is not one)?"""
    if any(is_module_base(b.value, ctx, local_modules) for b in node.bases):
        return True
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    if not any(isinstance(s, cst.FunctionDef) and s.name.value == "forward" for s in body):
        return False
    return any(_imported_from_outside_torch(b.value, ctx) for b in node.bases)


def _imported_from_outside_torch(base: cst.BaseExpression, ctx) -> bool:
    if isinstance(base, cst.Name) and base.value in ctx.names.relative:
        return True
    name = ctx.resolve(base)
    return name is not None and name.split(".", 1)[0] != "torch"


def strip_module_methods(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``nn.Linear(2, 2).to(device).eval()`` -> ``nn.Linear(2, 2)``."""
    while expr.__class__ is cst.Call and expr.func.__class__ is cst.Attribute and expr.func.attr.value in MODULE_METHODS:
        expr = expr.func.value
    return expr


def is_module_constructor(expr: cst.BaseExpression, ctx, local_modules: set[str]) -> bool:
    """Does ``expr`` build a module: a ``torch.nn`` layer (``nn.Linear(...)``), a module class
    of this file, ``torchvision.models.*(...)``, ``timm.create_model(...)`` or a
    ``*.from_pretrained(...)`` that is not a tokenizer, processor or config (method chains such
    as ``.to(device)`` included)?"""
    expr = strip_module_methods(expr)
    if expr.__class__ is not cst.Call:
        return False
    func = expr.func
    if func.__class__ is cst.Name and func.value in local_modules:
        return True
    name = ctx.resolve(func) or ""
    last = name.rsplit(".", 1)[-1]
    if name.startswith("torch.nn.") and last[:1].isupper() and last not in _NOT_MODULES:
        return True
    if name.startswith("torchvision.models.") or name == "timm.create_model":
        return True
    if func.__class__ is cst.Attribute and func.attr.value == "from_pretrained":
        owner = dotted(func.value) or ""
        return not any(k in owner for k in ("Tokenizer", "Processor", "Config", "FeatureExtractor"))
    return False
