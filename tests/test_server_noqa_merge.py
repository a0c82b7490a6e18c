"""Adding ``# noqa: CODE`` merges with an existing ``# noqa`` so that flake8 still honours
both (the server's quick fix and ``check --add-noqa``), checked against flake8's own regex."""

from __future__ import annotations

import itertools

from flake8.defaults import NOQA_INLINE_REGEXP
from flake8.utils import parse_comma_separated_list

from devlint import noqa
from devlint.finding import Finding

from conftest import flake8


def listed(line: str) -> set[str] | None:
    """The codes flake8 reads from ``line`` (``None``: a bare noqa, every code)."""
    match = NOQA_INLINE_REGEXP.search(line)
    if match is None:
        return set()
    codes = match.group("codes")
    return None if codes is None else set(parse_comma_separated_list(codes))


def test_merge_keeps_the_reason_after_the_codes():
    assert noqa.merge("x = 1  # noqa: E501 reason", ["DEV102"]) == "x = 1  # noqa: E501,DEV102 reason"
    assert noqa.merge("x = 1  # noqa: E501, W291 see #12\n", ["DEV102"]) == "x = 1  # noqa: E501, W291, DEV102 see #12\n"
    assert noqa.merge("x = 1  # NOQA:E501\r\n", ["DEV102"]) == "x = 1  # NOQA:E501,DEV102\r\n"
    assert noqa.merge("x = 1  # type: ignore", ["DEV102"]) == "x = 1  # type: ignore  # noqa: DEV102"
    assert noqa.merge("x = 1   \n", ["DEV101", "DEV102"]) == "x = 1  # noqa: DEV101, DEV102\n"


def test_merge_leaves_what_already_suppresses():
    assert noqa.merge("x = 1  # noqa", ["DEV102"]) == "x = 1  # noqa"
    assert noqa.merge("x = 1  # noqa:  E501", ["DEV102"]) == "x = 1  # noqa:  E501"  # bare for flake8
    assert noqa.merge("x = 1  # noqa: DEV1", ["DEV102"]) == "x = 1  # noqa: DEV1"
    assert noqa.merge("x = 1  # noqa: DEV102 why", ["DEV102"]) == "x = 1  # noqa: DEV102 why"


def test_merge_suppresses_everything_it_did_plus_the_code_for_many_spellings():
    heads = ["# noqa:", "# noqa: ", "# NoQA:", "#  # noqa: "]
    lists = ["E501", "E501,W291", "E501, W291", "E501 W291", "E501,", "E501abc1", "DEV101"]
    tails = ["", " ", " reason", " see issue42", ", reason", "  -- because", "why"]
    for head, codes, tail in itertools.product(heads, lists, tails):
        line = f"x = y.cuda()  {head}{codes}{tail}"
        before = listed(line)
        after = listed(noqa.merge(line, ["DEV102"]))
        assert before is not None and after is not None, line
        assert before | {"DEV102"} <= after, (line, after)
        assert noqa.is_suppressed("DEV102", noqa.merge(line, ["DEV102"])), line


def test_edit_puts_the_comment_where_flake8_reads_it():
    text = (
        "a = f(\n"                        # 1
        "    x.cuda(),  # noqa: E501 why\n"  # 2: merged into
        ")\n"                             # 3
        's = """\n'                       # 4: inside a string: comment after it ends
        '# noqa: E1""".cuda()\n'          # 5: a noqa inside a string cannot be extended
        't = "# noqa: E501".cuda()\n'     # 6
        "v = 1 + \\\n"                    # 7: backslash: the comment goes on 8
        "    y.cuda()\n"                  # 8
        'w = """doc""".cuda()  # noqa\n'  # 9: bare: nothing to do
    )
    assert noqa.edit(text, 2, ["DEV102"]) == (2, "    x.cuda(),  # noqa: E501,DEV102 why\n")
    assert noqa.edit(text, 1, ["DEV102"]) == (1, "a = f(  # noqa: DEV102\n")
    assert noqa.edit(text, 4, ["DEV102"]) is None and noqa.edit(text, 6, ["DEV102"]) is None
    assert noqa.edit(text, 7, ["DEV102"]) == (8, "    y.cuda()  # noqa: DEV102\n")
    assert noqa.edit(text, 9, ["DEV102"]) is None
    assert noqa.edit(text, 99, ["DEV102"]) is None
    multi = 's = """\nline\n""".cuda()\n'
    assert noqa.edit(multi, 1, ["DEV102"]) == (3, '""".cuda()  # noqa: DEV102\n')


def test_add_is_idempotent_and_keeps_other_bytes():
    text = "import torch\r\nx = torch.ones(1).cuda()  # noqa: E501 long\r\ny = x.cuda(); z = x.cuda()\r\n"
    found = [Finding("t.py", 2, 17, "DEV102", "m"), Finding("t.py", 3, 5, "DEV102", "m"),
             Finding("t.py", 3, 19, "DEV102", "m"), Finding("t.py", 3, 19, "DEV101", "m")]
    once, changed = noqa.add(text, found)
    assert changed == 2
    assert once == ("import torch\r\nx = torch.ones(1).cuda()  # noqa: E501,DEV102 long\r\n"
                    "y = x.cuda(); z = x.cuda()  # noqa: DEV102, DEV101\r\n")
    assert noqa.add(once, found) == (once, 0)
    assert noqa.apply(found, once) == []


def test_flake8_honours_both_codes_after_the_merge(tmp_path):
    line = "x = torch.ones(1).cuda()  # noqa: E501 this line is long on purpose, really"
    target = tmp_path / "t.py"
    target.write_text(f"import torch\n{line}\n")
    args = ("--select=DEV102,E501", "--max-line-length=40", str(target))
    assert "DEV102" in flake8(*args).stdout
    merged = noqa.edit(target.read_text(), 2, ["DEV102"])
    assert merged is not None
    target.write_text(f"import torch\n{merged[1]}")
    result = flake8(*args)
    assert result.stdout == "" and result.returncode == 0, result.stdout


def test_edit_counts_lines_as_tokenize_does():
    text = "import torch\n\x0c\nx = torch.ones(1)  # a\x0cb\ny = x.cuda()\n"
    assert noqa.edit(text, 4, ["DEV102"]) == (4, "y = x.cuda()  # noqa: DEV102\n")
