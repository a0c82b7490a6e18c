"""``-j N`` and the content-hash cache change nothing but speed."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from devlint.cache import FOLDER, Cache
from devlint.finding import Edit, Finding, Fix

from conftest import LINT_FIXTURES, devlint


def test_parallel_output_equals_serial():
    serial = devlint("check", "-j", "1", "--no-cache", str(LINT_FIXTURES))
    parallel = devlint("check", "-j", "2", "--no-cache", str(LINT_FIXTURES))
    assert serial.returncode == parallel.returncode == 1
    assert serial.stdout == parallel.stdout and serial.stdout.count("DEV") > 20


def test_cache_hit_and_invalidation(tmp_tree):
    root = tmp_tree({"pyproject.toml": "[tool.devlint]\n", "a.py": "import torch\nx = torch.ones(1).cuda()\n"})
    first = devlint("check", "a.py", cwd=root)
    assert (root / FOLDER).is_dir() and list((root / FOLDER).glob("*/*"))
    second = devlint("check", "a.py", cwd=root)
    assert first.stdout == second.stdout and "DEV102" in second.stdout
    (root / "a.py").write_text("import torch\nx = torch.ones(1)\n")
    third = devlint("check", "a.py", cwd=root)
    assert third.returncode == 0 and "DEV102" not in third.stdout


def test_no_cache_writes_nothing(tmp_tree):
    root = tmp_tree({"pyproject.toml": "[tool.devlint]\n", "a.py": "import torch\nx = torch.ones(1).cuda()\n"})
    devlint("check", "--no-cache", "a.py", cwd=root)
    assert not (root / FOLDER).exists()


def test_corrupt_entry_is_a_miss(tmp_path):
    cache = Cache(tmp_path, ["DEV"], [])
    finding = Finding("a.py", 2, 4, "DEV102", "msg", 2, 10, Fix("f", (Edit(2, 4, 2, 10, "x"),), False))
    key = cache.key("a.py", b"data")
    cache.put(key, [finding])
    assert cache.get(key) == [finding] and cache.get(key)[0].fix == finding.fix
    (tmp_path / FOLDER / key[:2] / key).write_text("{not json")
    assert cache.get(key) is None


def test_concurrent_runs_share_the_cache(tmp_tree):
    files = {f"m{i}.py": f"import torch\nx{i} = torch.ones({i}).cuda()\n" for i in range(12)}
    root = tmp_tree({"pyproject.toml": "[tool.devlint]\n", **files})
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: devlint("check", "-j", "2", ".", cwd=root), range(4)))
    assert all(r.returncode == 1 and "Traceback" not in r.stderr for r in runs)
    assert len({r.stdout for r in runs}) == 1 and runs[0].stdout.count("DEV102") == 12
    assert not [p for p in Path(root / FOLDER).rglob(".tmp-*")]


def test_flake8_plugin_goes_through_the_cache(tmp_tree):
    from conftest import flake8

    root = tmp_tree({"a.py": "import torch\nx = torch.ones(1).cuda()\ny = torch.ones(1).cuda()  # noqa: DEV102\n"})
    first = flake8("--select=DEV", "a.py", cwd=root)
    entries = list((root / FOLDER).glob("*/*"))
    assert "DEV102" in first.stdout and len(entries) == 1
    # the entry holds the findings before # noqa (flake8 applies it): both lines are there
    assert entries[0].read_text().count('"DEV102"') == 2
    # served from the cache: a message changed in the entry is what flake8 prints
    entries[0].write_text(entries[0].read_text().replace(".cuda()", ".cached()"))
    second = flake8("--select=DEV", "a.py", cwd=root)
    assert ".cached()" in second.stdout and second.stdout.count("DEV102") == 1
    fresh = flake8("--select=DEV", "--devlint-no-cache", "a.py", cwd=root)
    assert fresh.stdout == first.stdout
    (root / "a.py").write_text("import torch\nx = torch.ones(1)\n")
    assert "DEV102" not in flake8("--select=DEV", "a.py", cwd=root).stdout
