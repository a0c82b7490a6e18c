"""What the test of an ``if`` says about device placement (DEV111's join of the two arms).

``if use_cuda: x = x.cuda()`` and ``if spk is not None: spk = spk.to(self.device)`` move a
value on one arm and leave it on the other; the other arm is the run without an accelerator
(the model stays on the CPU too) or the run where the value is ``None``. After such an ``if``
the value counts as moved. Any other test (``if not evaluate: labels = labels.to(d)``) leaves
the value unknown, as before.
"""

from __future__ import annotations

import re

import libcst as cst

#: words of a test that asks whether an accelerator is used (``use_cuda``, ``args.gpu``,
#: ``torch.cuda.is_available()``, ``device.type == "cuda"``, ``self.on_gpu``)
_DEVICE_WORDS = re.compile(r"cuda|gpu|device|accelerat|is_available|\bmps\b|\bxpu\b|\bnpu\b|\btpu\b", re.I)


def asks_for_accelerator(test: cst.BaseExpression) -> bool:
    """Does the test name an accelerator, a device or CUDA (``if use_cuda:``)?"""
    return bool(_DEVICE_WORDS.search(cst.Module([]).code_for_node(test)))


def not_none_names(test: cst.BaseExpression) -> set[str]:
    """The names ``x`` the test requires to be set: ``x is not None`` (also inside ``and``)."""
    if test.__class__ is cst.BooleanOperation and test.operator.__class__ is cst.And:
        return not_none_names(test.left) | not_none_names(test.right)
    if (test.__class__ is cst.Comparison and len(test.comparisons) == 1
            and test.comparisons[0].operator.__class__ is cst.IsNot
            and test.left.__class__ is cst.Name
            and test.comparisons[0].comparator.__class__ is cst.Name
            and test.comparisons[0].comparator.value == "None"):
        return {test.left.value}
    return set()
