"""``# noqa`` forms run through both front ends on the same file: the CLI must silence
exactly what flake8 silences."""

from __future__ import annotations

import pytest

from conftest import devlint as run_devlint, flake8, parse_findings

CASES = {
    "bare": ("x = torch.ones(1).cuda()  # noqa\n", set()),
    "code": ("x = torch.ones(1).cuda()  # noqa: DEV102\n", set()),
    "other code": ("x = torch.ones(1).cuda()  # noqa: DEV101\n", {(2, "DEV102")}),
    "prefix": ("x = torch.ones(1).cuda()  # noqa: DEV1\n", set()),
    "short prefix": ("x = torch.ones(1).cuda()  # noqa: DEV\n", set()),
    "several codes": ("x = torch.ones(1).cuda()  # noqa: E501,DEV102, W291\n", set()),
    "several codes, none matching": ("x = torch.ones(1).cuda()  # noqa: E501,DEV101\n", {(2, "DEV102")}),
    "space separated": ("x = torch.ones(1).cuda()  # noqa: E501 DEV102\n", set()),
    "upper case": ("x = torch.ones(1).cuda()  # NOQA: DEV102\n", set()),
    "mixed case, no space": ("x = torch.ones(1).cuda()  # NoQa:DEV102\n", set()),
    "lower-case code": ("x = torch.ones(1).cuda()  # noqa: dev102\n", {(2, "DEV102")}),
    "space before colon": ("x = torch.ones(1).cuda()  # noqa : DEV101\n", set()),
    "two findings, one listed": ("x = torch.ones(1, device='cuda').cuda()  # noqa: DEV101\n", {(2, "DEV102")}),
    # as flake8: a line break inside brackets ends the stretch of lines searched for the comment,
    # and DEV102 sits on the line of the `.cuda` token, where the comment belongs
    "multi-line statement, comment below": ("x = torch.ones(\n    1).cuda()  # noqa: DEV102\n", set()),
    "multi-line statement, comment on the first line": ("x = torch.ones(  # noqa: DEV102\n    1).cuda()\n", {(3, "DEV102")}),
    "multi-line string": ('x = torch.ones(1).cuda(); s = """\n"""  # noqa: DEV102\n', set()),
    "not a noqa": ("x = torch.ones(1).cuda()  # noqa-ish text: DEV102\n", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_findings_from_both_front_ends(tmp_tree, name):
    body, expected = CASES[name]
    root = tmp_tree({"n.py": "import torch\n" + body})
    cli = parse_findings(run_devlint("check", "--isolated", "n.py", cwd=root).stdout).get("n.py", set())
    f8 = parse_findings(flake8("--select=DEV", "n.py", cwd=root).stdout).get("n.py", set())
    assert cli == f8, name
    if expected is not None:
        assert cli == expected, name


def test_one_file_with_every_form(tmp_tree):
    body = "".join(b for b, _ in CASES.values())
    root = tmp_tree({"all.py": "import torch\n" + body})
    cli = parse_findings(run_devlint("check", "--isolated", "all.py", cwd=root).stdout)
    f8 = parse_findings(flake8("--select=DEV", "all.py", cwd=root).stdout)
    assert cli == f8 and cli  # some lines stay reported
