"""A module class is judged on its own facts: the DEV111-DEV114 findings of a fixture stay the
same, line for line, when the fixture shares its file with another fixture's classes.

The partners are a CTC loss head (``dev112_ctc_lengths_ok.py``: a class that is exempt for a
reason of its own) and a clean module file; neither holds a file-wide fact (a default device, a
framework that places the data, ``DataParallel``, a function of the same name) that may rightly
change another class's findings.
"""

from __future__ import annotations

import json

from conftest import LINT_FIXTURES, devlint

RULES = "DEV111,DEV112,DEV113,DEV114"
PARTNERS = ("dev112_ctc_lengths_ok.py", "dev113_dev114_modules_ok.py")
FIXTURES = sorted(p for p in LINT_FIXTURES.glob("dev11*.py") if p.name.startswith(("dev112", "dev113", "dev11x")))


def _text(path) -> str:
    text = path.read_text()
    return text if text.endswith("\n") else text + "\n"


def test_findings_of_a_fixture_do_not_depend_on_the_classes_beside_it(tmp_path):
    texts = {p.name: _text(p) for p in (*FIXTURES, *(LINT_FIXTURES / name for name in PARTNERS))}
    plan = {}  # written file name -> [(fixture name, its first line - 1)] of its parts
    for fixture in FIXTURES:
        plan[fixture.name] = [(fixture.name, 0)]
        for partner in PARTNERS:
            if partner != fixture.name:
                plan[f"{fixture.stem}__after__{partner}"] = [(partner, 0), (fixture.name, texts[partner].count("\n"))]
                plan[f"{fixture.stem}__before__{partner}"] = [(fixture.name, 0), (partner, texts[fixture.name].count("\n"))]
    for partner in PARTNERS:
        plan.setdefault(partner, [(partner, 0)])
    for name, parts in plan.items():
        (tmp_path / name).write_text("".join(texts[part] for part, _ in parts))
    result = devlint("check", "--isolated", "--no-cache", "--select", RULES, "--output-format", "json", str(tmp_path))
    assert "Traceback" not in result.stderr
    found = {(name, part): set() for name, parts in plan.items() for part, _ in parts}
    for finding in json.loads(result.stdout):
        name, row = finding["filename"].rsplit("/", 1)[-1], finding["location"]["row"]
        part, offset = next((p, o) for p, o in reversed(plan[name]) if row > o)
        found[name, part].add((row - offset, finding["location"]["column"], finding["code"]))
    assert any(found[f.name, f.name] for f in FIXTURES)  # the flagged fixtures are flagged alone
    differ = [(name, part) for name, part in found if found[name, part] != found[part, part]]
    assert differ == []
