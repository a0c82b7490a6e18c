"""The server's incremental lint (statement cache, memoised positions, cancellation) gives
exactly the findings of a full lint (``devlint check``'s ``runner.check_source``) of the same
text, on random edits of real files: PyTorch's own sources (installed with the test extra)
and, where the benchmark downloaded it, ``transformers``' ``cache_utils.py``."""

from __future__ import annotations

import importlib.util
import random
import zipfile
from pathlib import Path

import libcst as cst
import pytest

from devlint.incremental import StatementCache
from devlint.runner import check_source
from devlint.lsp.document_lint import Cancelled, DocumentState, lint_text

from conftest import ROOT

TORCH = Path(importlib.util.find_spec("torch").origin).parent if importlib.util.find_spec("torch") else None
WHEELS = ROOT / "benchmarks" / ".cache" / "wheels"


def real_files() -> list[tuple[str, str]]:
    """(name, text) of real files with findings: torch's ``cuda/__init__.py`` (2k lines, 16
    findings, fixes among them), ``utils/checkpoint.py``; ``transformers/cache_utils.py``
    when its wheel is in ``benchmarks/.cache``."""
    found = []
    if TORCH is not None:
        for name in ("cuda/__init__.py", "utils/checkpoint.py"):
            if (TORCH / name).is_file():
                found.append((f"torch/{name}", (TORCH / name).read_text(encoding="utf-8")))
    for wheel in sorted(WHEELS.glob("transformers-4.46.3-*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            found.append(("transformers/cache_utils.py", archive.read("transformers/cache_utils.py").decode()))
    return found


def typed(text: str, rng: random.Random) -> str:
    """``text`` after one editor-like change: a character typed or deleted, a line added,
    duplicated, deleted or re-indented, somewhere in the file (near a finding or not)."""
    lines = text.split("\n")
    k = rng.randrange(len(lines))
    line = lines[k]
    kind = rng.choice(("type", "type", "delete_char", "new_line", "duplicate", "delete_line", "indent", "cuda"))
    if kind == "type":
        at = rng.randrange(len(line) + 1)
        lines[k] = line[:at] + rng.choice("x_( ):.#'\"") + line[at:]
    elif kind == "delete_char" and line:
        at = rng.randrange(len(line))
        lines[k] = line[:at] + line[at + 1:]
    elif kind == "new_line":
        lines.insert(k, line[: len(line) - len(line.lstrip())] + rng.choice(("pass", "y = 1", "# note", "")))
    elif kind == "duplicate":
        lines.insert(k, line)
    elif kind == "delete_line":
        del lines[k]
    elif kind == "indent":
        lines[k] = "    " + line
    else:
        lines.insert(k, line[: len(line) - len(line.lstrip())] + "z = torch.zeros(1).cuda()")
    return "\n".join(lines)


def parses(text: str) -> bool:
    try:
        compile(text, "<edit>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


FILES = real_files()


@pytest.mark.skipif(not FILES, reason="no real files (torch is not installed)")
@pytest.mark.parametrize("name", [name for name, _ in FILES])
def test_random_edits_of_a_real_file_give_a_full_lints_findings(name):
    text = dict(FILES)[name]
    path = str(Path("/nonexistent-devlint-test") / name)  # no pyproject.toml: the defaults
    rng = random.Random(name)
    state = DocumentState()
    assert lint_text(text, path, state) == check_source(text.encode(), path, ["DEV"], [])
    compared = with_findings = cancelled = 0
    for step in range(14):
        new = typed(text, rng)
        if not parses(new):
            assert any(f.code == "DEV000" for f in lint_text(new, path, state))  # old findings stay meanwhile
            continue
        if step % 4 == 3:  # a lint given up half-way (a newer keystroke came) leaves the state usable
            calls = iter(range(10**6))
            with pytest.raises(Cancelled):
                lint_text(new, path, state, cancelled=lambda: next(calls) > 40)
            cancelled += 1
            new = typed(new, rng)
            if not parses(new):
                continue
        got = lint_text(new, path, state)
        full = check_source(new.encode(), path, ["DEV"], [])
        assert got == full, (name, step)
        compared += 1
        with_findings += bool(full)
        text = new
    assert compared >= 5 and with_findings >= 1 and cancelled >= 1


@pytest.mark.skipif(TORCH is None, reason="torch is not installed")
@pytest.mark.parametrize("name", ["amp/grad_scaler.py"])
def test_random_edits_of_a_real_file_parse_as_the_whole_text_does(name):
    """The statement cache (re-parsing only the touched statements of the innermost body) gives
    the tree ``libcst.parse_module`` gives, node for node, or the same syntax error."""
    text = (TORCH / name).read_text(encoding="utf-8")
    rng = random.Random(name)
    cache = StatementCache()
    cache.parse(text)
    compared = partial = 0
    for _ in range(30):
        new = typed(text, rng)
        try:
            expected = cst.parse_module(new)
        except cst.ParserSyntaxError:
            with pytest.raises(cst.ParserSyntaxError):
                cache.parse(new)
            continue
        module = cache.parse(new)
        assert module.code == new and module.deep_equals(expected), name
        compared += 1
        partial += not cache.stats.full
        text = new
    assert compared >= 15 and partial >= compared - 2


def big_class(methods: int = 24) -> str:
    """A module with one long class: methods (decorated or not, nested blocks, a nested class),
    class-level statements, findings (with fixes) in many of them and in a decorator."""
    parts = ["import torch\n\n\nclass Trainer:\n    scale = torch.ones(1).cuda()\n\n"]
    for k in range(methods):
        if k % 5 == 1:
            parts.append(f"    @torch.no_grad()\n    def step{k}(self, x):\n        return x.cuda() + {k}\n\n")
        elif k % 5 == 2:
            parts.append(f"    def loop{k}(self, xs):\n        for x in xs:\n            if x:\n"
                         f"                y = torch.zeros({k}).cuda()\n        return xs\n\n")
        elif k % 5 == 3:
            parts.append(f"    class Inner{k}:\n        def f(self):\n            return torch.ones({k}, device='cuda')\n\n")
        elif k % 5 == 4:
            parts.append(f"    @staticmethod\n    def plain{k}(a, b):\n        '''Doc\n    string'''\n        if a:\n"
                         f"            b = 1\n        else:\n            b = 2\n        return a + b\n\n")
        else:
            parts.append(f"    def method{k}(self, batch):\n        # a comment\n        out = self.model(batch)\n"
                         f"        return out.cuda()\n\n")
    parts.append("\nprint(Trainer)\n")
    return "".join(parts)


def class_edit(text: str, rng: random.Random) -> str:
    """An edit inside the class: a method edited, added, deleted or decorated, a class-level
    statement added, a line de-indented out of the class (which breaks it apart) and back."""
    lines = text.split("\n")
    inside = [k for k, line in enumerate(lines) if line.startswith("    ")]
    k = rng.choice(inside)
    kind = rng.choice(("type", "finding", "method", "delete", "decorate", "class_level", "dedent", "blank"))
    if kind == "type":
        at = rng.randrange(len(lines[k]) + 1)
        lines[k] = lines[k][:at] + rng.choice("x_( ):.#") + lines[k][at:]
    elif kind == "finding":
        line = lines[k]
        lines.insert(k, line[: len(line) - len(line.lstrip())] + "z = torch.zeros(1).cuda()")
    elif kind == "method":
        lines.insert(k, "    def added(self):\n        return torch.ones(2).cuda()\n")
    elif kind == "delete":
        del lines[k:k + rng.randrange(1, 5)]
    elif kind == "decorate":
        lines.insert(k, lines[k][: len(lines[k]) - len(lines[k].lstrip())] + "@torch.no_grad()")
    elif kind == "class_level":
        lines.insert(k, "    total = torch.zeros(3).cuda()")
    elif kind == "dedent":
        lines[k] = lines[k].lstrip()
    else:
        lines.insert(k, "")
    return "\n".join(lines)


def test_edits_inside_a_big_class_give_a_full_lints_findings():
    """Findings inside a long class are placed by rendering only the statements that hold them
    (:mod:`devlint.inner_positions`); every edit must still give ``devlint check``'s findings."""
    from devlint.inner_positions import KEY

    text = big_class()
    path = "/nonexistent-devlint-test/trainer.py"
    rng = random.Random("big class")
    state = DocumentState()
    assert lint_text(text, path, state) == check_source(text.encode(), path, ["DEV"], [])
    compared = deep = 0
    for step in range(50):
        new = class_edit(text, rng)
        got = lint_text(new, path, state)
        try:
            cst.parse_module(new)
        except cst.ParserSyntaxError:
            assert any(f.code == "DEV000" for f in got)
            continue
        full = check_source(new.encode(), path, ["DEV"], [])
        assert got == full, step
        assert len(full) >= 5
        compared += 1
        deep += bool(state.positions.get(KEY))
        text = new
    assert compared >= 20 and deep >= compared - 3, (compared, deep)


def module_class(methods: int = 18) -> str:
    """A long ``nn.Module`` whose rules read the whole class or a loop: ``__init__`` and
    ``forward`` (DEV113, DEV114), training loops moving part of a batch (DEV111), an AMP loop
    (clipping before unscaling), availability guards and ``# noqa`` comments between them."""
    parts = ["import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n"
             "    def __init__(self, n=4):\n        super().__init__()\n"
             "        self.blocks = [nn.Linear(n, n) for _ in range(3)]\n        self.scale = torch.ones(n)\n\n"
             "    def forward(self, x):\n        mask = torch.zeros(x.shape[0])\n        return x * self.scale + mask\n\n"]
    for k in range(methods):
        if k % 4 == 0:
            parts.append(f"    def fit{k}(self, loader, crit, device):\n        for x, y in loader:\n"
                         f"            out = self(x.to(device))\n            loss = crit(out, y)\n            loss.backward()\n\n")
        elif k % 4 == 1:
            parts.append(f"    def amp{k}(self, loader, opt):\n        scaler = torch.cuda.amp.GradScaler()\n"
                         f"        for x in loader:\n            with torch.autocast('cuda'):\n                loss = self(x).sum()\n"
                         f"            scaler.scale(loss).backward()\n"
                         f"            torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)\n"
                         f"            scaler.step(opt)\n            scaler.update()\n\n")
        elif k % 4 == 2:
            parts.append(f"    def place{k}(self, x):\n        if torch.cuda.is_available():\n"
                         f"            x = x.cuda()\n        y = torch.ones(2).cuda()  # noqa: DEV102\n"
                         f"        return torch.load('w{k}.pt'), x, y\n\n")
        else:
            parts.append(f"    def helper{k}(self, batch, flag=None):\n        # plain\n"
                         f"        return self.forward(batch[0]), batch[1].cuda(), flag\n\n")
    parts.append("\nnet = Net().cuda()\n")
    return "".join(parts)


def module_edit(text: str, rng: random.Random) -> str:
    """:func:`class_edit`, or an edit that changes what a whole-class or loop rule reads:
    ``forward``/``__init__`` bodies, a batch item moved or not, an unscale added, a ``# noqa``."""
    lines = text.split("\n")
    kind = rng.choice(("class", "class", "forward", "init", "move", "unscale", "noqa"))
    if kind == "class":
        return class_edit(text, rng)
    if kind == "forward" and "    def forward(self, x):" in lines:
        at = lines.index("    def forward(self, x):") + 1
        lines.insert(at, rng.choice(("        x = x.to(self.scale.device)", "        extra = torch.randn(3)",
                                     "        self.seen = torch.zeros(1)")))
    elif kind == "init" and "        super().__init__()" in lines:
        at = lines.index("        super().__init__()") + 1
        lines.insert(at, rng.choice(("        self.extra = torch.zeros(2)", "        self.more = [nn.ReLU()]",
                                     "        self.register_buffer('b', torch.ones(1))")))
    elif kind == "move":
        spots = [k for k, line in enumerate(lines) if "crit(out, y)" in line or "crit(out, y.to(device))" in line]
        if spots:
            k = rng.choice(spots)
            lines[k] = (lines[k].replace("crit(out, y)", "crit(out, y.to(device))") if "y)" in lines[k]
                        else lines[k].replace("y.to(device)", "y"))
    elif kind == "unscale":
        spots = [k for k, line in enumerate(lines) if "clip_grad_norm_" in line]
        if spots:
            k = rng.choice(spots)
            lines.insert(k, lines[k][: len(lines[k]) - len(lines[k].lstrip())] + "scaler.unscale_(opt)")
    else:
        k = rng.randrange(len(lines))
        if lines[k].strip() and not lines[k].rstrip().endswith(("\\", ":", ",", "(")) and "#" not in lines[k]:
            lines[k] += rng.choice(("  # noqa", "  # noqa: DEV1", "  # noqa: DEV201"))
    return "\n".join(lines)


def test_edits_of_whole_class_and_loop_rules_give_a_full_lints_findings():
    """Edits inside a long ``nn.Module`` (its ``__init__``, ``forward``, loops, ``# noqa``
    comments) with everything the server keeps between lints (statement cache, positions,
    the analyses' per-node results, the ``# noqa`` line map): always ``devlint check``'s findings."""
    text = module_class()
    path = "/nonexistent-devlint-test/net.py"
    rng = random.Random("module class")
    state = DocumentState()
    first = lint_text(text, path, state)
    assert first == check_source(text.encode(), path, ["DEV"], [])
    assert len({f.code for f in first}) >= 5, first
    compared = 0
    codes: set[str] = set()
    for step in range(60):
        new = module_edit(text, rng)
        got = lint_text(new, path, state)
        if not parses(new):
            assert any(f.code == "DEV000" for f in got)
            continue
        full = check_source(new.encode(), path, ["DEV"], [])
        assert got == full, step
        codes |= {f.code for f in full}
        compared += 1
        text = new
    assert compared >= 30 and len(codes) >= 6, (compared, codes)


def test_typing_in_a_late_method_resumes_the_walk_and_gives_a_full_lints_findings(monkeypatch):
    """Keystrokes in one method of a long class resume the walk after the unchanged members
    before it (:mod:`devlint.resume`), and what a member before it reads of the whole file
    (an import, ``self.scaler.update(``, a new guard) changes with an edit there: every
    lint still gives ``devlint check``'s findings, and the walk did resume."""
    from devlint import resume

    restored = []
    real = resume.ClassResume._restore
    monkeypatch.setattr(resume.ClassResume, "_restore", lambda self, *a: restored.append(1) or real(self, *a))
    text = module_class(12)
    lines = text.split("\n")
    row = max(k for k, line in enumerate(lines) if line.startswith("    def place"))
    path = "/nonexistent-devlint-test/net.py"
    state = DocumentState()
    assert lint_text(text, path, state) == check_source(text.encode(), path, ["DEV"], [])
    inserts = ["        # typing", "        z = torch.zeros(1).cuda()", "        import torch.cuda.amp",
               "        self.scaler.update()", "        if not torch.cuda.is_available():\n            return",
               "        w = torch.cuda.amp.GradScaler()", "        # more"]
    for step, line in enumerate(inserts):
        lines.insert(row + 1, line)
        new = "\n".join(lines)
        assert lint_text(new, path, state) == check_source(new.encode(), path, ["DEV"], []), step
    assert len(restored) >= 3, restored


def tail_class(methods: int = 12) -> str:
    """A long class whose later members read what an earlier one may set: ``self.use_cuda``
    (a guard name), ``self.scaler`` (a GradScaler attribute), a version flag read through the
    whole text, deprecated AMP names whose fix needs every use, loops over a loader, findings
    with fixes in most of them. The middle method (``middle``) is the one the edits type in."""
    parts = ["import torch\nfrom torch.cuda.amp import autocast\n\n\nclass Trainer:\n"
             "    def __init__(self, model):\n        self.model = model\n        self.use_cuda = False\n"
             "        self.heads = [torch.nn.Linear(2, 2) for _ in range(2)]\n\n"]
    for k in range(methods):
        if k == methods // 2:
            parts.append("    def middle(self, batch):\n        out = self.model(batch)\n        # typing here\n"
                         "        return out\n\n")
        if k % 4 == 0:
            parts.append(f"    def guarded{k}(self, x):\n        if self.use_cuda:\n            x = x.cuda()\n"
                         f"        return torch.zeros({k}).cuda() + x\n\n")
        elif k % 4 == 1:
            parts.append(f"    def amp{k}(self, loss, opt):\n        with autocast():\n            out = self.model(loss)\n"
                         f"        self.scaler.scale(out).backward()\n        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)\n"
                         f"        self.scaler.step(opt)\n\n")
        elif k % 4 == 2 and k < methods // 2:  # it reads the whole text: no tail resumed over it
            parts.append(f"    def gated{k}(self):\n        if HAS_NEW_AMP:\n            return torch.cuda.amp.GradScaler()\n"
                         f"        return torch.load('w{k}.pt')\n\n")
        elif k % 4 == 2:
            parts.append(f"    def old_amp{k}(self, x):\n        with torch.cuda.amp.autocast():\n            y = autocast()\n"
                         f"        return torch.load('w{k}.pt', map_location='cpu')\n\n")
        else:
            parts.append(f"    def loop{k}(self, loader, device):\n        for x, y in loader:\n"
                         f"            loss = self.model(x.to(device), y)\n            loss.backward()\n\n")
    parts.append("\ntrainer = Trainer(torch.nn.Linear(2, 2)).cuda()\n")
    return "".join(parts)


#: lines typed into ``middle``: neutral ones, and ones that change what the later members see
TAIL_INSERTS = ["        # typing", "        z = torch.zeros(1).cuda()", "        self.use_cuda = torch.cuda.is_available()",
                "        # more", "        self.scaler = torch.cuda.amp.GradScaler()", "        x = autocast()",
                "        HAS_NEW_AMP = version.parse(torch.__version__) >= version.parse('2.4')",
                "        import torch.cuda.amp as amp", "        for x in batch:\n            y = x.cuda()",
                "        if not torch.cuda.is_available():\n            return", "        # last"]


def _typing_in_middle(monkeypatch, project=None, root=None) -> tuple[list, list]:
    """Type :data:`TAIL_INSERTS` one after another (each added, then the next on top) into the
    middle method, then remove them one by one; every lint compared with ``devlint check``.
    Returns (how often the tail was resumed, how often it was recorded)."""
    from devlint import resume_tail

    resumed, recorded = [], []
    restore, record = resume_tail.TailResume._restore, resume_tail.TailResume._record
    monkeypatch.setattr(resume_tail.TailResume, "_restore", staticmethod(lambda *a: resumed.append(1) or restore(*a)))
    monkeypatch.setattr(resume_tail.TailResume, "_record", lambda self, *a: recorded.append(1) or record(self, *a))
    text = tail_class()
    lines = text.split("\n")
    row = lines.index("        # typing here")
    path = str((root or Path("/nonexistent-devlint-test")) / "trainer.py")
    state = DocumentState()

    def full(new):
        view = project.view(path) if project is not None else None
        return check_source(new.encode(), path, ["DEV"], [], project=view)

    assert lint_text(text, path, state, project=project) == full(text)
    steps = [*((k, line) for k, line in enumerate(TAIL_INSERTS)), *((k, None) for k in reversed(range(len(TAIL_INSERTS))))]
    for step, (k, line) in enumerate(steps):
        if line is not None:
            lines.insert(row + 1, line)
        else:
            del lines[row + 1]
        new = "\n".join(lines)
        assert lint_text(new, path, state, project=project) == full(new), (step, k, line)
        for again in range(2):  # keep typing on the line: the tail is resumed when nothing it reads changed
            lines[row] += "x"
            new = "\n".join(lines)
            assert lint_text(new, path, state, project=project) == full(new), (step, again)
    return resumed, recorded


def test_typing_in_a_middle_method_skips_the_members_after_it_and_gives_a_full_lints_findings(monkeypatch):
    """Keystrokes in a method in the middle of a long class: the walk resumes after the
    unchanged members before it (:mod:`devlint.resume`) and puts back the state after the last
    member instead of walking the members after it (:mod:`devlint.resume_tail`), where what
    they see is the same. Lines that change what they see (a guard name, a scaler attribute, a
    version flag read through the text, a deprecated import and its uses, an early exit)
    are typed and removed: every lint gives ``devlint check``'s findings, and the tail was
    resumed and recorded again."""
    resumed, recorded = _typing_in_middle(monkeypatch)
    assert len(resumed) >= 20 and len(recorded) >= 5, (len(resumed), len(recorded))


def test_typing_in_a_middle_method_with_a_project_view_follows_the_other_files(monkeypatch, tmp_path):
    """The same with the project index: the walk resumes with a project view too, and when a
    file the skipped members read changes (a loader helper, a module base class), the
    findings follow it."""
    from devlint.project import ProjectIndex

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helper.py").write_text("from torch.utils.data import DataLoader\n\ndef build(ds):\n    return DataLoader(ds)\n")
    (tmp_path / "base.py").write_text("class Base:\n    pass\n")
    index = ProjectIndex()
    resumed, _ = _typing_in_middle(monkeypatch, index, tmp_path)
    assert len(resumed) >= 20, len(resumed)
    # the class and a later member read other files: a change there reaches the findings
    head, middle, tail = tail_class().partition("        # typing here\n")
    text = head.replace("class Trainer:", "class Trainer(Base):").replace(
        "import torch\n", "import torch\nfrom base import Base\nfrom helper import build\n", 1) + middle + tail.replace(
        "        for x, y in loader:", "        for x, y in build(loader):")  # read by members after the typing only
    path = str(tmp_path / "trainer.py")
    lines = text.split("\n")
    row = lines.index("        # typing here")
    state = DocumentState()
    seen = set()
    for step, (helper, base) in enumerate([("DataLoader(ds)", "Base:"), ("DataLoader(ds)", "Base:"), ("[ds]", "Base:"),
                                            ("[ds]", "Base(torch.nn.Module):"), ("DataLoader(ds)", "Base(torch.nn.Module):")]):
        index.overlay(str(tmp_path / "helper.py"), f"from torch.utils.data import DataLoader\n\ndef build(ds):\n    return {helper}\n")
        index.overlay(str(tmp_path / "base.py"), f"import torch\n\nclass {base}\n    pass\n")
        lines[row] += "x"
        new = "\n".join(lines)
        got = lint_text(new, path, state, project=index)
        assert got == check_source(new.encode(), path, ["DEV"], [], project=index.view(path)), step
        assert str(tmp_path / "helper.py") in state.deps, step
        seen.add(tuple(sorted(f.code for f in got)))
    assert len(seen) >= 3, seen  # the other files' changes did change the findings


def test_a_resumed_walk_needs_the_other_files_it_read_unchanged(tmp_path):
    """What a skipped stretch of the walk read of other project files is checked before its
    state is put back (:func:`devlint.walk_state.deps_current`): the same hashes, and a
    project view exactly where the state was walked with one."""
    from devlint.project import ProjectIndex
    from devlint.walk_state import deps_current, project_deps

    helper = tmp_path / "helper.py"
    helper.write_text("def build(ds):\n    return ds\n")
    index = ProjectIndex()
    view = index.view(str(tmp_path / "train.py"))
    view.deps[str(helper)] = index.digest(str(helper))
    deps = project_deps(view)
    assert deps_current(deps, index.view(str(tmp_path / "train.py")))
    assert deps_current(None, None) and not deps_current(None, view) and not deps_current(deps, None)
    index.overlay(str(helper), "def build(ds):\n    return list(ds)\n")
    assert not deps_current(deps, index.view(str(tmp_path / "train.py")))


def method_edit(text: str, rng: random.Random, name: str = "amp9") -> str:
    """An edit inside the method ``name`` of :func:`module_class` (a character typed, a line
    deleted, a finding, a scaler attribute, an unscale, a guard, an early return added), or,
    one time in five, :func:`module_edit` anywhere."""
    lines = text.split("\n")
    start = next((k for k, line in enumerate(lines) if line.startswith(f"    def {name}(")), None)
    if start is None or rng.random() < 0.2:
        return module_edit(text, rng)
    end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("    def ")), len(lines))
    k = rng.randrange(start + 1, end)
    kind = rng.choice(("type", "type", "delete", "insert"))
    if kind == "type":
        at = rng.randrange(len(lines[k]) + 1)
        lines[k] = lines[k][:at] + rng.choice("x_( ):.#") + lines[k][at:]
    elif kind == "delete" and end - start > 3:
        del lines[k]
    else:
        indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())] or "        "
        lines.insert(k, indent + rng.choice(("z = torch.zeros(1).cuda()", "self.scaler = torch.cuda.amp.GradScaler()",
                                             "scaler.unscale_(opt)", "self.use_cuda = torch.cuda.is_available()",
                                             "return", "# typing", "import torch.cuda.amp as amp")))
    return "\n".join(lines)


def test_random_edits_in_one_method_resume_after_it_and_give_a_full_lints_findings(monkeypatch):
    """Random edits concentrated in one method in the middle of a long ``nn.Module`` (and now
    and then anywhere): the members after it are skipped when the state after it is the same
    (:mod:`devlint.resume_tail`), and every lint gives ``devlint check``'s findings."""
    from devlint import resume_tail

    resumed = []
    restore = resume_tail.TailResume._restore
    monkeypatch.setattr(resume_tail.TailResume, "_restore", staticmethod(lambda *a: resumed.append(1) or restore(*a)))
    text = module_class()
    path = "/nonexistent-devlint-test/net.py"
    rng = random.Random("one method")
    state = DocumentState()
    assert lint_text(text, path, state) == check_source(text.encode(), path, ["DEV"], [])
    compared = 0
    for step in range(80):
        new = method_edit(text, rng)
        got = lint_text(new, path, state)
        if not parses(new):
            assert any(f.code == "DEV000" for f in got)
            continue
        assert got == check_source(new.encode(), path, ["DEV"], []), step
        compared += 1
        text = new
    assert compared >= 40 and len(resumed) >= 10, (compared, len(resumed))


def import_edit(text: str, rng: random.Random) -> str:
    """An import of the deprecated AMP API (or of something else) added to or removed from a
    random member of :func:`module_class` (its first one too), with a use of what it binds, or
    :func:`method_edit` now and then: DEV206's imported names are kept per member between lints."""
    lines = text.split("\n")
    if rng.random() < 0.2:
        return method_edit(text, rng)
    added = [k for k, line in enumerate(lines) if "# imported" in line]
    if added and rng.random() < 0.3:
        del lines[rng.choice(added)]
        return "\n".join(lines)
    heads = [k for k, line in enumerate(lines) if line.startswith("    def ")]
    k = rng.choice(heads[:1] * 3 + heads)
    n = rng.randrange(100)
    lines[k + 1:k + 1] = rng.choice((
        [f"        from torch.cuda.amp import autocast as ac{n}  # imported", f"        with ac{n}():  # imported",
         "            pass  # imported"],
        [f"        import torch.cuda.amp as amp{n}  # imported", f"        s{n} = amp{n}.GradScaler()  # imported"],
        [f"        from torch.cuda import amp as am{n}  # imported", f"        am{n}.autocast()  # imported"],
        [f"        import os.path as p{n}  # imported"]))
    return "\n".join(lines)


def test_random_imports_in_members_give_a_full_lints_findings():
    """Imports added to and removed from the members of a long ``nn.Module`` (the first one
    often), with uses of what they bind: DEV206 reads the imported names of each member kept
    between lints (``Context.remembered``), and every lint gives ``devlint check``'s findings."""
    text = module_class(10)
    path = "/nonexistent-devlint-test/net.py"
    rng = random.Random("member imports")
    state = DocumentState()
    assert lint_text(text, path, state) == check_source(text.encode(), path, ["DEV"], [])
    compared = with_imports = 0
    for step in range(70):
        new = import_edit(text, rng)
        got = lint_text(new, path, state)
        if not parses(new):
            assert any(f.code == "DEV000" for f in got)
            continue
        full = check_source(new.encode(), path, ["DEV"], [])
        assert got == full, step
        compared += 1
        with_imports += "# imported" in new and any(f.code == "DEV206" for f in full)
        text = new
    assert compared >= 40 and with_imports >= 20, (compared, with_imports)
