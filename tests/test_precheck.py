"""The ``ast`` pre-check never loses a finding: every fixture, every rule example, every public
case and (where downloaded) the benchmark corpus give the same findings with and without it."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from conftest import LINT_FIXTURES, ROOT
from devlint import precheck
from devlint.engine import enabled_rules, lint, triggered
from devlint.source import decode
from devlint.rules import all_rules

#: The public cases (read in place, never copied): beside the checkout, as CI lays them out,
#: or at the path the workplace uses.
CASES = next((p for p in (ROOT.parent / "shared" / "cases", ROOT / "shared" / "cases", Path("/work/shared/cases")) if p.is_dir()), None)
CORPUS = ROOT / "benchmarks" / ".cache" / "corpus"
#: the ecosystem packages' sources, where ``python benchmarks/ecosystem.py`` has fetched them
ECOSYSTEM = ROOT / "benchmarks" / ".cache" / "ecosystem" / "src"


def _differences(paths) -> list[str]:
    problems = []
    for path in paths:
        data = Path(path).read_bytes()
        with_check = lint(data, str(path))
        without = lint(data, str(path), precheck=False)
        if with_check != without:
            lost = sorted(set(without) - set(with_check))
            extra = sorted(set(with_check) - set(without))
            problems.append(
                f"{path}: lost {[f'{f.line}:{f.code}' for f in lost]} gained {[f'{f.line}:{f.code}' for f in extra]}"
                " (widen that rule's `candidate` pre-check)"
            )
    return problems


def test_fixtures_same_findings_with_and_without_precheck():
    files = sorted(LINT_FIXTURES.rglob("*.py"))
    assert files
    assert _differences(files) == []


def test_rule_examples_same_findings_with_and_without_precheck():
    problems = []
    for rule in all_rules():
        for example in (*rule.flagged, *rule.clean):
            text = rule.runnable(example)
            a, b = lint(text, "example.py"), lint(text, "example.py", precheck=False)
            if a != b:
                problems.append(f"{rule.code}: {[f.code for f in a]} != {[f.code for f in b]}")
    assert problems == []


@pytest.mark.skipif(CASES is None, reason="the public cases (shared/cases) are not on this machine")
def test_public_cases_same_findings_with_and_without_precheck():
    files = sorted(CASES.glob("*.py"))
    assert files
    assert _differences(files) == []


@pytest.mark.skipif(not CORPUS.is_dir() or os.environ.get("DEVLINT_SKIP_CORPUS"),
                    reason="the benchmark corpus is not downloaded (python benchmarks/bench_lint.py fetches it)")
def test_benchmark_corpus_same_findings_with_and_without_precheck():
    """The rules the pre-check drops for a file find nothing in it (the rules it keeps run on
    the same parse as without it, and rules never see each other's state): every file of the
    benchmark corpus, and of the ecosystem packages where they are on this machine."""
    files = sorted(CORPUS.rglob("*.py"))
    if ECOSYSTEM.is_dir():
        files += sorted(ECOSYSTEM.rglob("*.py"))
    assert files
    problems, dropped_somewhere = [], 0
    for path in files:
        data = path.read_bytes()
        try:
            text = decode(data).text
        except (SyntaxError, UnicodeDecodeError, LookupError):
            continue
        rules = triggered(text, enabled_rules())
        kept, _ = precheck.candidates(text, rules)
        dropped = [r for r in rules if r not in kept]
        dropped_somewhere += bool(dropped)
        if dropped:
            lost = lint(data, str(path), rules=dropped, precheck=False)
            problems += [f"{path}:{f.line}: {f.code} (widen that rule's `candidate` pre-check)" for f in lost]
    assert problems == [] and dropped_somewhere


def test_precheck_spares_libcst_files_without_candidates():
    """A file that mentions torch but holds nothing any rule looks for is not a candidate for
    any rule; one ``.cuda()`` makes it one for DEV102 only."""
    rules = enabled_rules()
    plain = "import torch\n\ndef norm(x):\n    return torch.nn.functional.normalize(x, dim=-1)\n"
    always = [r for r in rules if r.candidate is None]  # rules without a predicate stay candidates
    kept, tree = precheck.candidates(plain, rules)
    assert kept == always and len(always) < len(rules) and isinstance(tree, ast.Module)
    kept, _ = precheck.candidates(plain + "y = norm(x).cuda()\n", rules)
    assert sorted(r.code for r in kept) == sorted(["DEV102", *(r.code for r in always)])


def test_precheck_keeps_every_rule_without_a_predicate_or_without_an_ast():
    class NoPredicate(all_rules()[0]):
        candidate = None

    kept, _ = precheck.candidates("import torch\n", [NoPredicate])
    assert kept == [NoPredicate]
    broken = "import torch\nx = (\n"  # the stdlib cannot parse it: libcst reports the error
    kept, tree = precheck.candidates(broken, enabled_rules())
    assert tree is None and kept == list(enabled_rules())
    assert [f.code for f in lint(broken, "broken.py")] == ["DEV000"]


def test_facts_resolve_through_every_import_of_the_file():
    text = "import torch as T\nfrom torch.cuda import amp\ndef f():\n    from torch import load as L\n"
    facts = precheck.Facts(ast.parse(text), text)
    attr = ast.parse("T.cuda.Event", mode="eval").body
    assert facts.resolve(attr) == {"torch.cuda.Event"}
    assert facts.resolve(ast.parse("L", mode="eval").body) == {"torch.load"}
    assert facts.resolve(ast.parse("amp.autocast", mode="eval").body) == {"torch.cuda.amp.autocast"}
    assert facts.resolve(ast.parse("np.zeros", mode="eval").body) == set()


def test_a_faulty_predicate_keeps_its_rule():
    class Faulty(all_rules()[0]):
        @staticmethod
        def candidate(facts):
            raise RuntimeError("boom")

    kept, _ = precheck.candidates("import torch\n", [Faulty])
    assert kept == [Faulty]


def _fixture_and_case_files():
    return [*sorted(LINT_FIXTURES.rglob("*.py")), *(sorted(CASES.glob("*.py")) if CASES else [])]


def test_parsing_in_pieces_keeps_the_code_and_the_findings(monkeypatch):
    """Long files are parsed in pieces joined into one Module (parsing.CHUNK_LINES): with tiny
    pieces, every fixture and case renders back to its exact text and gives the same findings."""
    from devlint import parsing

    files = _fixture_and_case_files()
    whole = {path: lint(path.read_bytes(), str(path)) for path in files}
    monkeypatch.setattr(parsing, "CHUNK_LINES", 4)
    pieces = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        cuts = parsing.cuts_by_tree(tree)
        pieces += bool(cuts)
        assert parsing.parse_in_pieces(text, cuts).code == text, path
        assert lint(path.read_bytes(), str(path)) == whole[path], path
    assert pieces > 10


def test_cuts_found_in_the_text_keep_the_code_and_the_findings(monkeypatch):
    """Without a stdlib tree (pre-check off) a long text is cut where its lines say
    (parsing.cuts_by_text) and the first lines of statements come from the ast of the reported
    pieces only: every fixture and case renders back to its text and gives the findings of
    the ast-cut parse."""
    from devlint import parsing

    monkeypatch.setattr(parsing, "CHUNK_LINES", 4)
    pieces = 0
    for path in _fixture_and_case_files():
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        lines = text.split("\n")
        cuts = parsing.cuts_by_text(lines, 4)
        if cuts and "\r" not in text:
            parsed = parsing.parse_pieces(lines, cuts)
            assert parsed is not None, path
            assert parsing.join_pieces(parsed, text).code == text, path
            pieces += 1
        assert lint(text, str(path), precheck=False) == lint(text, str(path), precheck=False, tree=tree), path
    assert pieces > 10


def test_a_misjudged_text_cut_falls_back(monkeypatch):
    """A ``def`` at column 0 inside a string, a multi-line decorator and a bracket: the piece
    before such a cut does not parse, and the text is cut by its stdlib tree instead."""
    from devlint import parsing

    monkeypatch.setattr(parsing, "CHUNK_LINES", 4)
    text = (
        "import torch\n" + "x = 1\n" * 5
        + 'DOC = """\ndef not_code():\n    pass\n"""\n' + "y = 2\n" * 5
        + "@decorate(\n    1,\n)\ndef f():\n    return torch.cuda.amp.autocast()\n" + "z = 3\n" * 5
        + "CALL = g(\ndef_ault=1)\n" + "w = 4\n" * 5
        + "def h():\n    return torch.cuda.amp.GradScaler()\n"
    )
    lines = text.split("\n")
    cuts = parsing.cuts_by_text(lines, 4)
    assert cuts and parsing.parse_pieces(lines, cuts) is None  # the cut inside DOC
    found = lint(text, "long.py", precheck=False)
    assert found == lint(text, "long.py", precheck=False, tree=ast.parse(text))
    assert [(f.code, f.line) for f in found] == [("DEV206", 20), ("DEV206", 34)]


def test_a_syntax_error_in_a_long_file_is_reported_at_its_line(monkeypatch):
    """libcst's own verdict (a target newer than the running Python, which the stdlib cannot
    judge) on a long file cut in pieces: the piece that fails is not where the line is counted
    from. The pieces are tried (the first text libcst gets is one), then the whole text."""
    from devlint import parsing, syntax

    monkeypatch.setattr(parsing, "CHUNK_LINES", 4)
    monkeypatch.setenv(syntax.ENV, "3.99")
    parsed = []
    real = parsing.cst.parse_module
    monkeypatch.setattr(parsing.cst, "parse_module", lambda text, *a, **k: parsed.append(text) or real(text, *a, **k))
    text = "import torch\n" + "x = 1\n" * 20 + "def f(:\n    pass\n" + "y = 2\n" * 20
    found = lint(text, "long.py", precheck=False)
    assert [(f.code, f.line) for f in found] == [("DEV000", 22)]
    assert len(parsed[0]) < len(text) and parsed[-1] == text


def test_cpu_flow_follows_the_dataflow_tables():
    """CpuFlow (DEV111's and DEV113's pre-check) copies the dataflow's lists of CPU-making torch
    calls and of joins: widen both together."""
    from devlint import dataflow, precheck_cpu_flow

    tables = set(dataflow.FACTORIES) | set(dataflow.LEGACY_CONSTRUCTORS) | {"tensor", "as_tensor", "from_numpy"}
    assert tables <= precheck_cpu_flow._CPU_MAKING
    assert precheck_cpu_flow._JOINS == dataflow._JOINS


def test_cpu_flow_tells_quiet_values_from_possible_cpu_tensors():
    text = (
        "import torch\nimport torch.nn as nn\n\n"
        "class M(nn.Module):\n"
        "    def __init__(self, dim, heads):\n"
        "        super().__init__()\n"
        "        head_dim = dim // heads\n"
        "        self.scale = head_dim ** -0.5\n"
        "        self.proj = nn.Linear(dim, dim)\n"
        "        self.table = torch.zeros(dim)\n"
        "        self.mask = self.table > 0\n"
        "        x = torch.ones(3)\n"
        "        for i in range(3):\n"
        "            x = x * 2\n"
        "        self.x = x\n"
    )
    tree = ast.parse(text)
    facts = precheck.Facts(tree, text)
    cls = facts.classes[0]
    init = cls.body[0]
    flow = precheck.CpuFlow(facts, cls)
    values = {s.targets[0].attr: s.value for s in ast.walk(init) if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Attribute)}
    assert flow.quiet(values["scale"], init) and flow.quiet(values["proj"], init)
    assert not flow.quiet(values["table"], init) and not flow.quiet(values["mask"], init)
    assert not flow.quiet(values["x"], init)  # x = torch.ones(3); x = x * 2: the cycle keeps the source


def test_new_predicates_spare_plain_model_files():
    """A model file with a forward, submodules and a `.to(dtype)` is no candidate for the
    dataflow rules (DEV111-DEV113) any more."""
    text = (
        "import torch\nimport torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        super().__init__()\n"
        "        self.norm = nn.LayerNorm(dim)\n"
        "        self.scale = dim ** -0.5\n"
        "        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))\n"
        "    def forward(self, x):\n"
        "        x = self.norm(x).to(torch.float32) * self.scale\n"
        "        return torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)\n"
    )
    kept, _ = precheck.candidates(text, triggered(text, enabled_rules()))
    assert not {r.code for r in kept} & {"DEV111", "DEV112", "DEV113"}
    moved = text + "\nmodel = Block(4).to('cuda')\nout = model(torch.randn(2, 3, 4))\n"
    kept, _ = precheck.candidates(moved, triggered(moved, enabled_rules()))
    assert "DEV111" in {r.code for r in kept}


def test_dev114_predicate_follows_the_filled_attribute():
    """An empty list on ``self`` makes a DEV114 candidate only where that same attribute is
    filled with a module: a local list of blocks beside ``self.feature_info = []`` (timm's
    model files) is not, ``self.blocks.append(Block())`` and ``self.blocks[k] = Block()`` are."""
    head = (
        "import torch.nn as nn\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.feature_info = []\n"
        "        self.blocks = []\n"
        "        stages = []\n"
    )
    tail = "        self.out = nn.Sequential(*stages)\n"

    def codes(line):
        text = head + line + tail
        return {r.code for r in precheck.candidates(text, triggered(text, enabled_rules()))[0]}

    assert "DEV114" not in codes("        stages.append(nn.Linear(2, 2))\n")
    assert "DEV114" not in codes("        self.feature_info.append(dict(num_chs=2))\n")
    assert "DEV114" in codes("        self.blocks.append(nn.Linear(2, 2))\n")
    assert "DEV114" in codes("        self.blocks['a'] = nn.Linear(2, 2)\n")


def test_dev101_predicate_reads_device_positions():
    """DEV101 is a candidate only where an accelerator literal sits in a device position, or is
    bound to a name that a device position uses: ``hasattr(torch, "xpu")`` and an enum member
    ``CUDA = "cuda"`` next to ``.to(device)`` (accelerate's utils) are not."""

    def codes(body):
        text = "import torch\n" + body
        return {r.code for r in precheck.candidates(text, triggered(text, enabled_rules()))[0]}

    assert "DEV101" not in codes('ok = hasattr(torch, "xpu")\n')
    assert "DEV101" not in codes('class Kind:\n    CUDA = "cuda"\n\ndef f(x, device):\n    return x.to(device)\n')
    assert "DEV101" in codes('d = torch.device("cuda")\n')
    assert "DEV101" in codes('x = torch.ones(2, device=f"cuda:{rank}")\n')
    assert "DEV101" in codes('DEVICE = "cuda"\n\ndef f(x):\n    return x.to(DEVICE)\n')
    assert "DEV101" in codes('def f(x, device="cuda:0"):\n    return x.to(device=device)\n')


def test_dev104_dev105_predicates_follow_the_rules_names_and_guards():
    """DEV104 needs a call that may resolve to one of its loaders (``CPUOffload(...)`` holds
    "load" and resolves into torch, and is none); DEV105 needs a raising call that is not surely
    guarded (in the body of ``if torch.cuda.is_available():`` or ``elif is_cuda_available():``
    it is guarded; in their ``else`` or a ``def`` nested there it may not be)."""

    def codes(body):
        text = "import torch\nfrom torch.distributed.fsdp import CPUOffload\n" + body
        return {r.code for r in precheck.candidates(text, triggered(text, enabled_rules()))[0]}

    assert "DEV104" not in codes("offload = CPUOffload(offload_params=True)\n")
    assert "DEV104" in codes("state = torch.load(path)\n")
    assert "DEV104" not in codes("state = torch.load(path, 'cpu')\n")
    guarded = ("if is_npu_available():\n    d = 0\nelif is_cuda_available():\n    d = torch.cuda.current_device()\n"
               "if torch.cuda.is_available() and rank == 0:\n    torch.cuda.synchronize()\n")
    assert "DEV105" not in codes(guarded)
    assert "DEV105" in codes(guarded + "else:\n    torch.cuda.synchronize()\n")
    assert "DEV105" in codes("if torch.cuda.is_available():\n    def later():\n        torch.cuda.synchronize()\n")
    assert "DEV105" in codes("if args.cuda:\n    torch.cuda.synchronize()\n")
