"""DEV111's pre-check by scope (devlint.precheck_dev_scope): a call is looked at only where its
function may see a device value. Each way such a value reaches a function that moves nothing
itself keeps its finding; a model file whose only device values are ``device=`` factories in a
``forward`` is no candidate."""

from __future__ import annotations

import ast

import pytest

from devlint import precheck
from devlint.dataflow import DTYPES
from devlint.engine import enabled_rules, lint, triggered
from devlint.precheck_dev_scope import DevScopes
from devlint.precheck_predicates import Facts

#: ``.to(`` in a comment passes DEV111's text trigger where the code has none
_TRIGGER = "# the caller moves the model with .to(device)\n"

#: one finding each, reached in a function that moves nothing itself
REACHED = {
    "factory": (
        "import torch\nimport torch.nn.functional as F\n\n"
        "def score():\n"
        "    pred = torch.zeros(3, device='cuda')\n"
        "    target = torch.tensor([0.0, 1.0, 1.0])\n"
        "    return F.mse_loss(pred, target)\n" + _TRIGGER
    ),
    "attribute": (
        "import torch\nimport torch.nn.functional as F\n\n"
        "class Scorer:\n"
        "    def __init__(self):\n"
        "        self.anchor = torch.zeros(3, device='cuda')\n\n"
        "    def score(self):\n"
        "        target = torch.tensor([0.0, 1.0, 1.0])\n"
        "        return F.mse_loss(self.anchor, target)\n" + _TRIGGER
    ),
    "loss module": (
        "import torch\nimport torch.nn as nn\n\n"
        "class Scorer:\n"
        "    def __init__(self):\n"
        "        self.judge = nn.MSELoss()\n\n"
        "    def score(self):\n"
        "        pred = torch.zeros(3, device='cuda')\n"
        "        return self.judge(pred, torch.tensor([0.0, 1.0, 1.0]))\n" + _TRIGGER
    ),
    "closure": (
        "import torch\nimport torch.nn as nn\n\n"
        "model = nn.Linear(4, 2).to('cuda')\n\n"
        "def predict():\n"
        "    return model(torch.randn(3, 4))\n"
    ),
    "moved attribute": (
        "import torch\nimport torch.nn as nn\n\n"
        "class Runner:\n"
        "    def __init__(self):\n"
        "        self.net = nn.Linear(4, 2).to('cuda')\n\n"
        "    def run(self):\n"
        "        return self.net(torch.randn(3, 4))\n"
    ),
    "moved item of a batch": (
        "import torch\n\n"
        "class Scorer:\n"
        "    def score_sequences(self, batch, device):\n"
        "        ids, targets = batch\n"
        "        ids = ids.to(device)\n"
        "        logits = self.model(ids)\n"
        "        return token_log_probs(logits, targets)\n"
    ),
    "moved parameter": (
        "import torch\n\n"
        "class Trainer:\n"
        "    def step(self, x, y):\n"
        "        out = self.net(x.cuda())\n"
        "        return score(out, y)\n"
    ),
    "parameter": (
        "import torch\n\n"
        "def apply(net, n):\n"
        "    return net(torch.randn(n, 4))\n\n"
        "def main():\n"
        "    net = torch.nn.Linear(4, 2).cuda()\n"
        "    apply(net, 3)\n"
    ),
}

#: timm's shape: device= factories in a forward beside submodule calls, a .to(dtype) elsewhere
MODEL_FILE = (
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
    "class Attention(nn.Module):\n"
    "    def __init__(self, dim):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(dim, dim)\n"
    "        self.proj_drop = nn.Dropout(0.1)\n\n"
    "    def forward(self, x):\n"
    "        n = x.shape[1]\n"
    "        pos = torch.arange(n, device=x.device)\n"
    "        grid = torch.stack(torch.meshgrid(torch.arange(4), torch.arange(4)))\n"
    "        x = self.proj(F.pad(x, (0, 1)) + pos[None, :, None] + grid.sum())\n"
    "        return self.proj_drop(x.to(torch.float32))\n\n"
    "def resize(w):\n"
    "    return F.interpolate(torch.tensor([[1.0]]), size=(2, 2)) * w.to(w.dtype)\n"
)


def _kept(text: str) -> set[str]:
    kept, _ = precheck.candidates(text, triggered(text, enabled_rules()))
    return {r.code for r in kept}


@pytest.mark.parametrize("name", sorted(REACHED))
def test_findings_reached_without_a_move_in_their_function_are_kept(name):
    text = REACHED[name]
    without = lint(text, f"{name}.py", precheck=False)
    assert "DEV111" in [f.code for f in without], name  # the dataflow finds it
    assert lint(text, f"{name}.py") == without
    assert "DEV111" in _kept(text)


def test_device_factories_in_a_forward_make_no_dev111_candidate():
    assert "DEV111" not in _kept(MODEL_FILE)
    assert [f for f in lint(MODEL_FILE, "m.py", precheck=False) if f.code == "DEV111"] == []


@pytest.mark.parametrize("extra, code", [
    # a moved batch in the same function: every call there is looked at again
    ("\ndef step(model, loader, device):\n    for x, y in loader:\n        model(x.to(device), y)\n", "DEV111"),
    # a loss given a device factory's tensor
    ("\ndef lossy():\n    p = torch.ones(2, device='cuda')\n    return F.l1_loss(p, torch.tensor([1.0, 2.0]))\n",
     "DEV111"),
])
def test_the_model_file_becomes_a_candidate_where_a_finding_may_arise(extra, code):
    assert code in _kept(MODEL_FILE + extra)


def test_a_function_moving_only_what_belongs_to_no_batch_is_no_candidate():
    """Moving ``self``'s attributes, a global or a fresh tensor partly moves no batch: the
    helper calls beside them (``torch.cat``, ``F.pad``) cannot be reported; a moved name of the
    function, a parameter or a call's batch makes them candidates again."""
    head = "import torch\nimport torch.nn.functional as F\nmodel = None\n\nclass Ema:\n"
    body = (
        "    def update(self, device, items):\n"
        "        self.shadow.to(device)\n"
        "        model.cuda()\n"
        "        w = torch.tensor([1.0]).to(device)\n"
        "        return torch.cat([items, F.pad(torch.ones(2), (1, 1))]) * w\n"
    )
    assert "DEV111" not in _kept(head + body)
    for moved in ("items.to(device)", "next(iter(self.loader)).to(device)", "self.src.next_batch().cuda()"):
        assert "DEV111" in _kept(head + body + f"    def other(self, device, items):\n        {moved}\n"
                                 "        return F.pad(torch.ones(2), (1, 1))\n"), moved


def test_scopes_follow_closures_attributes_and_helpers():
    text = (
        "import torch\n\n"
        "def make():\n    return torch.zeros(2, device='cuda')\n\n"
        "def use():\n    return make()\n\n"
        "def plain():\n    return torch.ones(2)\n\n"
        "class K:\n"
        "    def fill(self):\n        self.w = torch.ones(2, device='cuda')\n"
        "    def read(self):\n        return self.w\n"
        "    def other(self):\n        return self.v\n"
        "    def outer(self):\n"
        "        def inner():\n            return self.w\n"
        "        return inner\n"
    )
    tree = ast.parse(text)
    scopes = DevScopes(Facts(tree, text), DTYPES)
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    sees = {name: scopes.frames[id(node)].sees for name, node in defs.items()}
    assert sees == {"make": True, "use": True, "plain": False, "fill": True, "read": True, "other": False,
                    "outer": False, "inner": True}


def test_scopes_kept_for_the_file_hold_no_cycle_through_its_facts():
    """DevScopes kept in ``facts.memo`` must not point back at ``facts``: with the collector off
    (as while libcst parses) such a cycle kept the whole stdlib tree alive (+190 MB at 100k
    lines). The tree must go as soon as the pre-check's caller drops it."""
    import gc
    import weakref

    text = REACHED["factory"]
    rules = triggered(text, enabled_rules())
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        kept, tree = precheck.candidates(text, rules)
        assert any(rule.code == "DEV111" for rule in kept)
        gone = weakref.ref(tree)
        del tree
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()


@pytest.mark.parametrize("unpack", [
    "imgs, pids = self.parse_data_for_train(data)",  # torchreid's engines, a mutant of seeded.py
    "imgs, pids = data[0], data[1]",
    "imgs, pids = data['img'], data['pid']",
])
def test_an_item_unpacked_beside_a_moved_sibling_stays_a_candidate(unpack):
    """DEV111 reports the item left behind while its sibling moved, whatever the unpacked value
    is (a call the pre-check finds quiet, a display of subscripts): the pre-check must keep the
    file (reading such items as surely no CPU tensor lost these findings: reverted)."""
    text = (
        "import torch\n\n\nclass Engine:\n    def forward_backward(self, data):\n"
        f"        {unpack}\n"
        "        if self.use_gpu:\n            pids = pids.cuda()\n"
        "        outputs = self.model(imgs)\n"
        "        loss = self.criterion(outputs, pids)\n        loss.backward()\n"
    )
    on = [(f.code, f.line) for f in lint(text, "a.py", precheck=True) if f.code == "DEV111"]
    off = [(f.code, f.line) for f in lint(text, "a.py", precheck=False) if f.code == "DEV111"]
    assert off == [("DEV111", 9)]
    assert on == off
