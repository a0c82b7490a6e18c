"""``devlint check`` at ruff's level (issue 12): the full format, colour, ``[*]`` and the
fixable summary, formats and paths, and the options ruff users reach for. Each through the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from conftest import ROOT, devlint, flake8, parse_findings

SOURCE = '''import torch


def train(model, x, device):
    model.cuda()
    return torch.load("ckpt.pt")
'''


def full(*args, cwd, env=None, stdin=None):
    return devlint("check", "--no-cache", *args, cwd=cwd, stdin=stdin, env={"DEVLINT_OUTPUT_FORMAT": "", **(env or {})})


def test_full_format_is_the_default(tmp_tree):
    root = tmp_tree({"src/train.py": SOURCE})
    result = full(".", cwd=root)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[:8] == [
        "src/train.py:5:11: DEV102 .cuda() pins this to CUDA: use .to(device)",
        "  |",
        "4 | def train(model, x, device):",
        "5 |     model.cuda()",
        "  |           ^^^^ DEV102",
        "6 |     return torch.load(\"ckpt.pt\")",
        "  |",
        "  = help: use .to(device) (unsafe)",
    ]
    assert lines[-1] == "Found 2 findings in 1 of 1 file (2 fixable with `--fix --unsafe-fixes`)."
    assert "\x1b[" not in result.stdout  # not a terminal: no colour


def test_fixable_marker_and_summary(tmp_tree):
    root = tmp_tree({"a.py": "import torch\nscaler = torch.cuda.amp.GradScaler()\nstate = torch.load('x.pt')\n"})
    concise = full("--output-format", "concise", "a.py", cwd=root).stdout.splitlines()
    assert concise[0] == 'a.py:2:10: DEV206 [*] cuda.amp.GradScaler is deprecated: use torch.amp.GradScaler("cuda")'
    assert concise[1].startswith("a.py:3:9: DEV104 torch.load")  # unsafe fix: no [*] without --unsafe-fixes
    assert concise[-1] == "Found 2 findings in 1 of 1 file (1 fixable with `--fix`; 1 more with `--unsafe-fixes`)."
    unsafe = full("--output-format", "concise", "--unsafe-fixes", "a.py", cwd=root).stdout.splitlines()
    assert "DEV104 [*]" in unsafe[1] and unsafe[-1].endswith("(2 fixable with `--fix --unsafe-fixes`).")


def test_colour_follows_no_color_and_force_color(tmp_tree):
    root = tmp_tree({"a.py": SOURCE})
    forced = full("a.py", cwd=root, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert "\x1b[1m\x1b[31mDEV102\x1b[0m" in forced.stdout
    both = full("a.py", cwd=root, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert "\x1b[" not in both.stdout  # NO_COLOR wins
    assert "\x1b[" not in full("--output-format", "json", "a.py", cwd=root, env={"FORCE_COLOR": "1", "NO_COLOR": ""}).stdout


def test_output_format_and_format_alias(tmp_tree):
    root = tmp_tree({"a.py": SOURCE})
    one = json.loads(full("--output-format", "json", "a.py", cwd=root).stdout)
    two = json.loads(full("--format", "json", "a.py", cwd=root).stdout)
    assert one == two and [i["code"] for i in one] == ["DEV102", "DEV104"]
    text = full("--format", "text", "a.py", cwd=root).stdout  # the old name: one line a finding
    assert text.splitlines()[0].startswith("a.py:5:11: DEV102") and " |" not in text
    assert full("--output-format", "xml", "a.py", cwd=root).returncode == 2


def test_paths_are_the_same_in_every_format(tmp_tree):
    root = tmp_tree({".git/HEAD": "ref: refs/heads/main\n", "src/train.py": SOURCE})
    concise = full("--output-format", "concise", ".", cwd=root).stdout
    assert concise.startswith("src/train.py:5:11:") and "./" not in concise
    assert {i["path"] for i in json.loads(full("--output-format", "json-devlint", ".", cwd=root).stdout)} == {"src/train.py"}
    sarif = json.loads(full("--output-format", "sarif", "./src", cwd=root).stdout)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"]}
    assert uris == {"src/train.py"}
    assert "file=src/train.py," in full("--output-format", "github", ".", cwd=root).stdout


def test_sarif_rules_have_help_uri_and_markdown(tmp_tree):
    root = tmp_tree({"a.py": SOURCE})
    rules = json.loads(full("--output-format", "sarif", "a.py", cwd=root).stdout)["runs"][0]["tool"]["driver"]["rules"]
    for rule in rules:
        # devlint has no published docs page: no link to a page that does not exist
        assert "helpUri" not in rule
        assert rule["help"]["markdown"].startswith(f"# {rule['name']} ({rule['id']})")


def test_show_fixes_lists_what_was_fixed(tmp_tree):
    root = tmp_tree({"a.py": "import torch\nscaler = torch.cuda.amp.GradScaler()\n"})
    result = full("--fix", "--show-fixes", "a.py", cwd=root)
    assert "Fixed 1 finding:\n- a.py:\n    1 × DEV206 (deprecated-amp-api)" in result.stdout
    diff = full("--diff", "--show-fixes", "a.py", cwd=root)
    assert "No fixes applied." in diff.stdout and "Would fix 0 findings." in diff.stdout  # already fixed


def test_quiet_and_silent(tmp_tree):
    root = tmp_tree({"a.py": SOURCE})
    quiet = full("--quiet", "--output-format", "concise", "a.py", cwd=root)
    assert quiet.returncode == 1 and len(quiet.stdout.splitlines()) == 2 and "Found" not in quiet.stdout
    silent = full("--silent", "a.py", cwd=root)
    assert silent.returncode == 1 and silent.stdout == ""


def test_stdin_filename(tmp_tree):
    root = tmp_tree({"pkg/pyproject.toml": "[tool.devlint]\nignore = [\"DEV104\"]\n"})
    result = full("--output-format", "concise", "--stdin-filename", "pkg/train.py", cwd=root, stdin=SOURCE)
    assert result.returncode == 1
    assert parse_findings(result.stdout) == {"train.py": {(5, "DEV102")}}  # pkg's settings: DEV104 ignored
    assert result.stdout.startswith("pkg/train.py:5:11:")
    shown = full("--stdin-filename", "train.py", "-", cwd=root, stdin=SOURCE)
    assert "5 |     model.cuda()" in shown.stdout  # the full format shows standard input's lines
    fixed = full("--fix", "--stdin-filename", "t.py", "-", cwd=root, stdin="import torch\ns = torch.cuda.amp.GradScaler()\n")
    assert fixed.stdout == 'import torch\ns = torch.amp.GradScaler("cuda")\n'  # the fixed source, as ruff


def test_config_file_applies_to_every_file(tmp_tree):
    root = tmp_tree({"a/a.py": SOURCE, "b/pyproject.toml": "[tool.devlint]\nselect = [\"DEV104\"]\n", "b/b.py": SOURCE,
                     "ci.toml": "select = [\"DEV102\"]\n"})
    both = parse_findings(full("--output-format", "concise", "a", "b", cwd=root).stdout)
    assert both == {"a.py": {(5, "DEV102"), (6, "DEV104")}, "b.py": {(6, "DEV104")}}  # b's own settings
    forced = parse_findings(full("--output-format", "concise", "--config", "ci.toml", "a", "b", cwd=root).stdout)
    assert forced == {"a.py": {(5, "DEV102")}, "b.py": {(5, "DEV102")}}
    assert full("--config", "missing.toml", "a", cwd=root).returncode == 2
    inline = parse_findings(full("--output-format", "concise", "--config", "select = ['DEV104']", "a", cwd=root).stdout)
    assert inline == {"a.py": {(6, "DEV104")}}  # TOML on the command line, as ruff's --config allows


def test_per_file_configuration_in_a_monorepo(tmp_tree):
    root = tmp_tree({
        "pyproject.toml": "[tool.devlint]\nignore = [\"DEV104\"]\n",
        "packages/app/pyproject.toml": "[tool.devlint]\nselect = [\"DEV104\"]\n",
        "packages/app/train.py": SOURCE,
        "tools/run.py": SOURCE,
    })
    found = parse_findings(full("--output-format", "concise", ".", cwd=root).stdout)
    assert found == {"train.py": {(6, "DEV104")}, "run.py": {(5, "DEV102")}}
    named = parse_findings(full("--output-format", "concise", "packages/app/train.py", "tools/run.py", cwd=root).stdout)
    assert named == found  # a root-level pre-commit hook naming files gets the same answer


def test_show_files_and_show_settings(tmp_tree):
    root = tmp_tree({"pyproject.toml": "[tool.devlint]\nignore = [\"DEV104\"]\ntorch-version = \"2.6\"\n",
                     "src/a.py": SOURCE, "nb/n.ipynb": "{}", "notes.txt": ""})
    files = full("--show-files", ".", cwd=root)
    assert files.returncode == 0 and files.stdout.splitlines() == ["nb/n.ipynb", "src/a.py"]
    settings = full("--show-settings", "src/a.py", cwd=root).stdout
    assert "ignore            = DEV104" in settings and "torch-version     = 2.6" in settings
    assert str(root / "pyproject.toml") in settings


def test_select_all(tmp_tree):
    root = tmp_tree({"a.py": SOURCE, "b.py": "import torch\ndef broken(:\n"})
    found = parse_findings(full("--output-format", "concise", "--select", "ALL", ".", cwd=root).stdout)
    assert found == {"a.py": {(5, "DEV102"), (6, "DEV104")}, "b.py": {(2, "DEV000")}}


def test_notebooks_are_found_in_folders(tmp_tree):
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ["import torch\n", "m = torch.nn.Linear(2, 2).cuda()\n"]}
    notebook = json.dumps({"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# Train\n"]}, cell],
                           "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    root = tmp_tree({"notebooks/train.ipynb": notebook})
    result = full("--output-format", "concise", ".", cwd=root)
    assert result.stdout.startswith("notebooks/train.ipynb:cell 2:2:27: DEV102")  # markdown counts, as in ruff


def test_gitignore_is_respected(tmp_tree):
    root = tmp_tree({
        ".git/HEAD": "ref: refs/heads/main\n",
        ".gitignore": "generated/\n*_pb2.py\n!keep_pb2.py\n",
        "src/.gitignore": "scratch.py\n",
        "src/a.py": SOURCE, "src/scratch.py": SOURCE, "src/x_pb2.py": SOURCE, "src/keep_pb2.py": SOURCE,
        "generated/g.py": SOURCE,
    })
    shown = full("--show-files", ".", cwd=root).stdout.splitlines()
    assert shown == ["src/a.py", "src/keep_pb2.py"]
    assert full("--show-files", "src", cwd=root).stdout.splitlines() == ["src/a.py", "src/keep_pb2.py"]
    everything = full("--show-files", "--no-respect-gitignore", ".", cwd=root).stdout.splitlines()
    assert len(everything) == 5
    assert full("--show-files", "src/scratch.py", cwd=root).stdout.splitlines() == ["src/scratch.py"]  # named: linted
    # a folder named on the command line that .gitignore hides is linted, as ruff does (issue 23)
    assert full("--show-files", "generated", cwd=root).stdout.splitlines() == ["generated/g.py"]
    assert full("--show-files", "--force-exclude", "generated", cwd=root).stdout == ""
    (root / "pyproject.toml").write_text("[tool.devlint]\nrespect-gitignore = false\n")
    assert len(full("--show-files", ".", cwd=root).stdout.splitlines()) == 5


def test_usage_errors(tmp_tree):
    root = tmp_tree({"a.py": SOURCE})
    for args, words in [
        (("-j", "0"), "-j/--jobs must be 1 or more"),
        (("-j", "-1"), "-j/--jobs must be 1 or more"),
        (("--select", ""), "selects nothing"),
        (("--select", "DEV999"), "unknown rule selector 'DEV999'"),
        (("--ignore", "E501"), "unknown rule selector 'E501'"),
        (("--extend-select", "XYZ"), "unknown rule selector 'XYZ'"),
    ]:
        result = full(*args, "a.py", cwd=root)
        assert result.returncode == 2 and words in result.stderr, (args, result.stderr)
    # the real range of codes, read from the rules (a new user was told "DEV101 to DEV2xx")
    from devlint.rules import all_rules

    last = max(r.code for r in all_rules())
    unknown = full("--select", "DEV999", "a.py", cwd=root).stderr
    assert f"codes are DEV000 and DEV101 to {last}: `devlint rule --all` lists them" in unknown, unknown
    assert "xx" not in unknown, unknown
    bogus = full("--bogus", "a.py", cwd=root)
    assert bogus.returncode == 2 and bogus.stderr.startswith("usage: devlint check ") and "--bogus" in bogus.stderr
    for body, where in (('select = ["DEV1" "DEV2"]\n', "line 2"), ('select = ["DEV1"\n', "line 2")):
        (root / "pyproject.toml").write_text("[tool.devlint]\n" + body)
        toml = full(".", cwd=root)
        assert toml.returncode == 2 and "pyproject.toml: not valid TOML" in toml.stderr and where in toml.stderr, toml.stderr


def test_no_python_files_found_warns(tmp_tree):
    root = tmp_tree({"docs/readme.md": "# hi\n"})
    result = full(".", cwd=root)
    assert result.returncode == 0 and "No Python files found" in result.stderr


def test_add_noqa_merges_and_silences_for_flake8_too(tmp_tree):
    source = ('import torch\nx = torch.ones(1).cuda()  # noqa: E501 long line\n'
              'y = torch.ones(1,\n    device="cuda")\ns = """\n%s""" % torch.load("a")\n')
    root = tmp_tree({"a.py": source})
    result = full("--add-noqa", "a.py", cwd=root)
    assert result.returncode == 0 and "Added 3 noqa directives." in result.stderr
    text = (root / "a.py").read_text()
    assert "# noqa: E501,DEV102 long line" in text and 'device="cuda")  # noqa: DEV101' in text
    assert '"""\n%s""" % torch.load("a")  # noqa: DEV104' in text
    assert full("a.py", cwd=root).returncode == 0
    assert flake8("--select=DEV", "a.py", cwd=root).stdout == ""
    again = full("--add-noqa", "a.py", cwd=root)
    assert "Added 0 noqa directives." in again.stderr and (root / "a.py").read_text() == text


def test_notebook_fix_and_diff(tmp_tree):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Train\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": 1,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}],
         "source": ["%matplotlib inline\n", "import torch\n", "from torch.cuda.amp import GradScaler\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": 2, "outputs": [], "source": ["scaler = GradScaler()"]},
    ]
    data = json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5},
                      indent=1) + "\n"
    root = tmp_tree({"train.ipynb": data})
    diff = full("--diff", "train.ipynb", cwd=root)
    assert diff.returncode == 1 and (root / "train.ipynb").read_text() == data
    assert "--- a/train.ipynb:cell 2\n" in diff.stdout and "+from torch.amp import GradScaler\n" in diff.stdout
    assert "+++ b/train.ipynb:cell 3\n" in diff.stdout and '+scaler = GradScaler("cuda")' in diff.stdout
    full("--fix", "train.ipynb", cwd=root)
    after = json.loads((root / "train.ipynb").read_text())
    assert after["cells"][1]["source"] == ["%matplotlib inline\n", "import torch\n", "from torch.amp import GradScaler\n"]
    assert after["cells"][2]["source"] == ['scaler = GradScaler("cuda")']
    assert after["cells"][1]["outputs"] == cells[1]["outputs"] and after["metadata"] == {"kernelspec": {"name": "python3"}}
    changed = [a for a, b in zip((root / "train.ipynb").read_text().splitlines(), data.splitlines()) if a != b]
    assert len(changed) == 2  # only the two source lines: layout, outputs and metadata kept byte for byte


def test_torch_version_uses_torch_accelerator(tmp_tree):
    source = 'import torch\nDEVICE = "cuda"\nmodel = torch.nn.Linear(2, 2).to(DEVICE)\n'
    root = tmp_tree({"pyproject.toml": "[tool.devlint]\ntorch-version = \"2.6\"\n", "a.py": source})
    shown = full("--output-format", "full", "a.py", cwd=root).stdout  # the fix on offer, under the finding
    assert "help: fall back to the CPU: torch.accelerator.current_accelerator().type if torch.accelerator.is_available()" in shown
    full("--fix", "--unsafe-fixes", "a.py", cwd=root)
    assert (root / "a.py").read_text().splitlines()[1] == (
        'DEVICE = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"')
    old = tmp_tree({"b.py": source})
    full("--fix", "--unsafe-fixes", "--torch-version", "2.4", "b.py", cwd=old)
    assert (old / "b.py").read_text().splitlines()[1] == 'DEVICE = "cuda" if torch.cuda.is_available() else "cpu"'


def test_watch_checks_again_on_change(tmp_tree):
    root = tmp_tree({"a.py": "import torch\nx = torch.ones(1)\n"})
    env = {**os.environ, "DEVLINT_OUTPUT_FORMAT": "concise", "NO_COLOR": "1", "DEVLINT_WATCH_POLL": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "devlint", "check", "--watch", "--no-cache", "."], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        deadline = time.time() + 60
        while time.time() < deadline and not any("waiting for changes" in l for l in lines):
            lines.append(proc.stdout.readline())
        assert any("All checks passed" in l for l in lines)
        assert re.match(r"\[devlint --watch\] \d\d:\d\d:\d\d checking \.$", lines[0]), lines[0]  # a timestamp
        time.sleep(1)
        (root / "a.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
        while time.time() < deadline and not any("DEV102" in l for l in lines):
            lines.append(proc.stdout.readline())
        assert any(l.startswith("a.py:2:19: DEV102") for l in lines), lines
    finally:
        proc.kill()
        proc.wait()


def test_pre_commit_hook_runs_serially():
    import yaml

    hook = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())[0]
    assert hook["require_serial"] is True


def test_torch_version_is_per_file_whatever_the_order(tmp_tree):
    """Issue 23: torch-version came from the first path named; it is a key like any other."""
    source = 'import torch\nDEVICE = "cuda"\nmodel = torch.nn.Linear(2, 2).to(DEVICE)\n'
    root = tmp_tree({"a/pyproject.toml": '[tool.devlint]\ntorch-version = "2.6"\n', "a/t.py": source,
                     "b/pyproject.toml": '[tool.devlint]\ntorch-version = "2.4"\n', "b/t.py": source})
    one = full("--no-cache", "a/t.py", "b/t.py", cwd=root).stdout
    assert one == full("--no-cache", "b/t.py", "a/t.py", cwd=root).stdout
    helps = [line for line in one.splitlines() if "help:" in line]
    assert "torch.accelerator" in helps[0] and "torch.cuda.is_available()" in helps[1]
    full("--fix", "--unsafe-fixes", "b/t.py", "a/t.py", cwd=root)
    assert "torch.accelerator" in (root / "a" / "t.py").read_text()
    assert 'DEVICE = "cuda" if torch.cuda.is_available() else "cpu"' in (root / "b" / "t.py").read_text()


def test_show_files_sorted_quiet_show_fixes_and_diff_endings(tmp_tree):
    """Issue 23: --show-files is sorted; -q keeps the --show-fixes list; --diff's summary is on
    standard output and a last line without a newline is marked, not run into the next line."""
    source = "import torch\nscaler = torch.cuda.amp.GradScaler()"  # no final newline
    root = tmp_tree({"b.py": source, "a/z.py": "x = 1\n", "c.py": "y = 2\n"})
    listed = full("--show-files", "c.py", "b.py", "a", cwd=root).stdout.splitlines()
    assert listed == sorted(listed) == ["a/z.py", "b.py", "c.py"]
    diff = full("--diff", "--show-fixes", "b.py", cwd=root)
    assert diff.stdout.endswith("Would fix 1 finding.\n") and "- b.py:\n    1 × DEV206" in diff.stdout
    assert '+scaler = torch.amp.GradScaler("cuda")\n\\ No newline at end of file\n' in diff.stdout
    assert "-scaler = torch.cuda.amp.GradScaler()\n\\ No newline at end of file\n" in diff.stdout
    quiet = full("-q", "--fix", "--show-fixes", "b.py", cwd=root).stdout
    assert "Fixed 1 finding:\n- b.py:\n    1 × DEV206 (deprecated-amp-api)" in quiet and "Found" not in quiet


def test_fix_from_stdin_reports_snippets_of_the_fixed_text(tmp_path):
    """With --fix on standard input the report numbers lines of the fixed text, so its snippets
    must show that text (they showed the unfixed input, the caret past the end of the line)."""
    source = "import torch\nfrom torch.cuda.amp import GradScaler\n\n\ndef train(model):\n    scaler = GradScaler()\n    return scaler\n"
    result = full("--fix", "--stdin-filename", "t.py", "-", cwd=tmp_path, stdin=source)
    assert 'GradScaler("cuda")' in result.stdout  # the fixed text
    snippet = [line for line in result.stderr.splitlines() if line.startswith("6 |")]
    assert snippet == ['6 |     scaler = GradScaler("cuda")'], result.stderr
