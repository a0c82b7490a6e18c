"""devlint runtime's command line: targets, formats, exit codes, and no torch at import time."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from devlint.runtime import cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STEPS = ROOT / "fixtures" / "runtime" / "steps.py"


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_no_target_checks_the_reference_step(capsys):
    code, out, err = _main(capsys, "--device", "cpu")
    assert code == 0, out + err
    assert "reference step (TinyClassifier)" in out
    assert "ok: every run is within tolerance, no findings" in out


def test_json_format(capsys):
    code, out, _ = _main(capsys, "--device", "cpu", "--format", "json", "--seed", "3")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["seed"] == 3
    assert [r["mode"] for r in data["runs"]] == ["float32", "bfloat16", "float16"]


def test_file_target_with_findings_exits_1(capsys):
    code, out, _ = _main(capsys, f"{STEPS}:arange_in_forward", "--device", "cpu")
    assert code == 1
    assert "[device-placement]" in out and "pos (AddPosition)" in out


def test_module_target(capsys):
    code, out, _ = _main(capsys, "devlint.runtime.reference:reference_step", "--device", "cpu")
    assert code == 0 and "reference step" in out


def test_deprecations_while_building_the_step_are_reported(capsys, tmp_path):
    target = tmp_path / "old_api.py"
    target.write_text(
        "import torch\n"
        "from devlint.runtime.reference import reference_step\n"
        "def make():\n"
        "    torch.cuda.amp.GradScaler(enabled=False)\n"
        "    return reference_step()\n")
    code, out, _ = _main(capsys, f"{target}:make", "--device", "cpu")
    assert code == 1 and out.count("[deprecation]") == 1 and "old_api.py:4" in out


@pytest.mark.parametrize("target, expected", [
    ("no_colon_here", "is not path/file.py:NAME or package.module:NAME"),
    ("missing/file.py:make", "file missing/file.py not found"),
    (f"{STEPS}:nope", "has no nope"),
    (f"{STEPS}:not_a_step", "returned int, not a TrainingStep"),
    (f"{STEPS}:raises", "raised ValueError: dataset path missing"),
    ("no_such_package.mod:make", "cannot import no_such_package.mod: ModuleNotFoundError"),
])
def test_target_errors_exit_2_with_one_line(capsys, target, expected):
    code, out, err = _main(capsys, target)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("devlint runtime: ") and expected in lines[0]
    assert not lines[0].endswith(".")


def test_syntax_error_in_target_exits_2(capsys, tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("def make(:\n")
    code, _, err = _main(capsys, f"{bad}:make")
    assert code == 2 and "cannot import" in err and "SyntaxError" in err
    assert len(err.strip().splitlines()) == 1


def _python(code: str, *args, env=None):
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def test_cli_module_needs_no_torch_until_run():
    proc = _python(
        "import sys, argparse; sys.modules['torch'] = None\n"
        "from devlint.runtime import cli\n"
        "p = argparse.ArgumentParser(); cli.add_arguments(p)\n"
        "args = p.parse_args(['--device', 'cuda'])\n"
        "sys.exit(cli.run(args))\n")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "devlint runtime: torch is not installed; pip install torch (devlint's [runtime] extra)"


def test_python_dash_m_end_to_end():
    proc = subprocess.run([sys.executable, "-m", "devlint.runtime", f"{STEPS}:fp16_overflow",
                           "--device", "cpu"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "[non-finite]" in proc.stdout and "fc1 (Linear)" in proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_path_of_the_cli(capsys):
    code, out, _ = _main(capsys, "--device", "cuda")
    assert code == 0, out
    assert "cuda" in out and "skipped: no CUDA" not in out


def test_json_stays_parseable_when_the_step_prints(capsys, tmp_path):
    target = tmp_path / "chatty.py"
    target.write_text(
        "from devlint.runtime.reference import reference_step\n"
        "print('building the step')\n"
        "def make():\n"
        "    print('hello from the factory')\n"
        "    step = reference_step()\n"
        "    inner = step.loss_fn\n"
        "    def loud(model, batch):\n"
        "        print('loss!')\n"
        "        return inner(model, batch)\n"
        "    step.loss_fn = loud\n"
        "    return step\n")
    code, out, err = _main(capsys, f"{target}:make", "--device", "cpu", "--format", "json")
    assert code == 0 and json.loads(out)["ok"] is True
    assert "hello from the factory" in err and "loss!" in err


def test_sibling_module_imported_lazily_inside_the_factory(capsys, tmp_path):
    (tmp_path / "helpers_for_devlint.py").write_text(
        "def make_step():\n"
        "    from devlint.runtime.reference import reference_step\n"
        "    return reference_step()\n")
    (tmp_path / "entry.py").write_text(
        "def make():\n"
        "    import helpers_for_devlint\n"
        "    return helpers_for_devlint.make_step()\n")
    before = list(sys.path)
    code, out, err = _main(capsys, f"{tmp_path / 'entry.py'}:make", "--device", "cpu")
    assert code == 0, out + err
    assert sys.path == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a missing CUDA device")
def test_absent_requested_device_exits_2(capsys):
    code, out, err = _main(capsys, "--device", "cuda")
    assert code == 2 and out == ""
    assert "--device cuda asked for" in err and len(err.strip().splitlines()) == 1


def test_step_that_calls_sys_exit_is_reported_and_exits_2(capsys, tmp_path):
    target = tmp_path / "exits.py"
    target.write_text(
        "import sys\n"
        "from devlint.runtime.reference import reference_step\n"
        "def make():\n"
        "    step = reference_step()\n"
        "    def quit_loss(model, batch):\n"
        "        sys.exit(3)\n"
        "    step.loss_fn = quit_loss\n"
        "    return step\n")
    code, out, err = _main(capsys, f"{target}:make", "--device", "cpu")
    assert code == 2
    assert "sys.exit(3)" in out and "[step-error]" in out


def test_mode_and_tolerance_options(capsys):
    code, out, _ = _main(capsys, "--device", "cpu", "--mode", "bfloat16", "--format", "json",
                         "--quick", "0", "--k", "1e-6")
    data = json.loads(out)
    assert code == 1 and [r["mode"] for r in data["runs"]] == ["float32", "bfloat16"]
    assert data["runs"][1]["status"] == "mismatch" and data["runs"][1]["floor"] > 0


def test_threads_option(capsys):
    before = torch.get_num_threads()
    try:
        code, out, _ = _main(capsys, "--device", "cpu", "--mode", "float32", "--threads", "1")
        assert code == 0 and torch.get_num_threads() == 1
        code, _, err = _main(capsys, "--threads", "0")
        assert code == 2 and "--threads must be 1 or more" in err
    finally:
        torch.set_num_threads(before)


def test_report_header_says_whether_the_target_was_built_under_the_seed(capsys, tmp_path):
    # NAME() runs after torch.manual_seed(seed); a module-level step was built at import, unseeded
    from devlint.runtime.target import built_under_seed, load_target

    target = tmp_path / "both.py"
    target.write_text("from devlint.runtime.reference import reference_step\n"
                      "STEP = reference_step()\n"
                      "def make():\n"
                      "    return reference_step()\n")
    assert built_under_seed(load_target(f"{target}:make", 0)[0]) is True
    assert built_under_seed(load_target(f"{target}:STEP", 0)[0]) is False
    code, out, _ = _main(capsys, f"{target}:STEP", "--device", "cpu", "--mode", "float32", "--format", "json")
    assert code == 0 and json.loads(out)["model_seeded"] is False
    code, out, _ = _main(capsys, f"{target}:make", "--device", "cpu", "--mode", "float32")
    assert code == 0 and "seed 0 (model and batch built under it)" in out.splitlines()[0]
