"""benchmarks/seeded.py: the mutator on inline code (offline), and a small-budget run over the
cached packages (skipped where ``python benchmarks/seeded.py`` has not fetched them)."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import seeded  # noqa: E402

LOOP = '''import torch


def train(model, loader, criterion, optimizer, device):
    model.to(device)
    for step, (images, target) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        target = target.cuda()
        output = model(images)
        loss = criterion(output, target)
        loss.backward()


def evaluate(model, loader, device):
    for x, y, lengths in loader:
        x, y, lengths = x.to(device), y.to(device), lengths.to(device)
        score(model(x, lengths), y)
        score(model(x.to(device)), y)
        z = x.to(torch.float16)


def collect(loader, device):
    for k, v in loader.items():
        out = v.to(device)
'''


def _mutants():
    return seeded.mutants_of("pkg", "loop.py", LOOP)


def test_mutator_removes_one_move_at_a_time_keeping_lines():
    found = {(m.line, m.shape, m.text.splitlines()[m.line - 1].strip()) for m in _mutants()}
    assert found == {
        (7, "x = x.to(d)", "images = images"),
        (8, ".cuda()", "target = target"),
        (16, "tuple half", "x, y, lengths = x, y.to(device), lengths.to(device)"),
        (16, "tuple half", "x, y, lengths = x.to(device), y, lengths.to(device)"),
        (18, "call arg", "score(model(x), y)"),
    }
    for m in _mutants():
        assert len(m.text.splitlines()) == len(LOOP.splitlines())
        compile(m.text, "mutant.py", "exec")


def test_mutator_skips_dtype_casts_lengths_and_whole_batch_moves():
    lines = {m.line for m in _mutants()}
    assert 19 not in lines  # .to(torch.float16): no device move
    assert 24 not in lines  # for k, v in batch.items(): the whole batch, item by item
    assert all("lengths, lengths" not in m.text for m in _mutants())  # lengths may stay on the CPU


def test_a_caught_mutant_is_a_new_dev111_finding():
    mutants = {(m.line, m.shape): m for m in _mutants()}
    before = seeded.dev111_lines(LOOP, "loop.py")
    assert before == set()
    assert seeded.caught(mutants[(7, "x = x.to(d)")], before)  # the input left behind, the target moved
    assert seeded.caught(mutants[(8, ".cuda()")], before)


def test_report_prints_recall_per_package_and_shape():
    import collections

    per_pkg = {"pkg": collections.Counter(mutants=4, caught=3, files=1)}
    per_shape = {"tuple half": collections.Counter(mutants=4, caught=3)}
    text = seeded.report(per_pkg, per_shape, ["pkg/a.py:3"])
    assert "| pkg | 4 | 3 | 0.75 |" in text and "| tuple half | 4 | 3 | 0.75 |" in text
    assert "| all | 4 | 3 | 0.75 |" in text and "unmutated files: 1" in text


CACHED = [p for p in seeded.PACKAGES if (seeded.ecosystem.CACHE / "src" / f"{p.name}-{p.version}" / ".done").exists()]


@pytest.mark.skipif(not CACHED, reason="no package cached: run python benchmarks/seeded.py once (it downloads them)")
def test_small_budget_run_over_the_cached_packages(capsys):
    names = ",".join(p.name for p in CACHED[:3])
    assert seeded.main(["--offline", "--only", names, "--budget", "3"]) == 0
    out = capsys.readouterr().out
    assert "| package | mutants | caught | DEV111 recall |" in out and "DEV111 findings on the unmutated files: 0" in out


WIDE = '''import torch


class Engine:
    def forward_backward(self, data):
        imgs, pids = self.parse_data_for_train(data)
        if self.use_gpu:
            imgs = imgs.cuda()
            pids = pids.cuda()
        outputs = self.model(imgs)
        return self.criterion(outputs, pids)


def fit(model, loader, device):
    model.to(device)
    for x, y in loader:
        x = x.to(device).float() / 255
        y = y.to(device)
        loss = crit(model(x), y)


def encode(model, data, loader, device):
    model.to(device)
    for d in loader:
        d = d.to(device)
        model(d)
    for d in data:
        d = data[d].to(device)
        model(d)
'''


def test_wide_shapes_only_where_asked():
    narrow = {(m.line, m.shape) for m in seeded.mutants_of("pkg", "wide.py", WIDE)}
    wide = {(m.line, m.shape) for m in seeded.mutants_of("pkg", "wide.py", WIDE, wide=True)}
    assert (8, ".cuda()") in wide and (9, ".cuda()") in wide  # items a helper unpacked from the batch
    assert (17, "chained") in wide  # x.to(d).float() / 255 -> x.float() / 255
    assert not {(8, ".cuda()"), (9, ".cuda()"), (17, "chained")} & narrow
    text = next(m.text for m in seeded.mutants_of("pkg", "wide.py", WIDE, wide=True) if m.line == 17)
    assert text.splitlines()[16].strip() == "x = x.float() / 255"


def test_a_whole_batch_move_is_no_site_from_any_region():
    lines = {m.line for m in seeded.mutants_of("pkg", "wide.py", WIDE, wide=True)}
    assert 25 not in lines  # for d in loader: d = d.to(device), even seen from encode's data parameter
    assert 28 in lines  # an item picked out of data is one


def test_heldout_packages_are_kept_apart():
    assert not {p.name for p in seeded.HELDOUT} & {p.name for p in seeded.PACKAGES}
    assert seeded.SETS["default"] is seeded.PACKAGES and seeded.SETS["heldout"] is seeded.HELDOUT


def test_fresh_packages_are_in_no_other_group():
    """The fresh set measures generalisation: none of its packages is tuned on, held out,
    linted by ecosystem.py or timed by bench_lint.py."""
    fresh = {p.name.lower() for p in seeded.FRESH}
    others = {p.name.lower() for p in (*seeded.PACKAGES, *seeded.HELDOUT)}
    bench = {"timm", "accelerate", "ultralytics", "lightning", "diffusers", "transformers"}
    assert len(fresh) == len(seeded.FRESH) >= 10
    assert not fresh & (others | bench)
    assert seeded.SETS["fresh"] is seeded.FRESH
    everyone = (*seeded.PACKAGES, *seeded.HELDOUT, *seeded.FRESH, *seeded.FOURTH, *seeded.FIFTH, *seeded.SIXTH,
                *seeded.SEVENTH, *seeded.EIGHTH)
    assert {p.name for p in seeded.SETS["all"]} == {p.name for p in everyone}


def test_fourth_packages_are_in_no_other_group():
    """The fourth set measures generalisation too: none of its packages is in another group,
    linted by ecosystem.py (any list) or timed by bench_lint.py."""
    fourth = {p.name.lower().replace("_", "-") for p in seeded.FOURTH}
    listed = (*seeded.PACKAGES, *seeded.HELDOUT, *seeded.FRESH, *seeded.ecosystem.PACKAGES)
    others = {p.name.lower().replace("_", "-") for p in listed}
    bench = {"timm", "accelerate", "ultralytics", "lightning", "diffusers", "transformers"}
    assert len(fourth) == len(seeded.FOURTH) >= 10
    assert not fourth & (others | bench)
    assert seeded.SETS["fourth"] is seeded.FOURTH


def test_fifth_packages_are_in_no_other_group():
    """The fifth set measures generalisation too: none of its packages is in another group,
    linted by ecosystem.py (any list) or timed by bench_lint.py."""
    fifth = {p.name.lower().replace("_", "-") for p in seeded.FIFTH}
    listed = (*seeded.PACKAGES, *seeded.HELDOUT, *seeded.FRESH, *seeded.FOURTH, *seeded.ecosystem.PACKAGES)
    others = {p.name.lower().replace("_", "-") for p in listed}
    bench = {"timm", "accelerate", "ultralytics", "lightning", "diffusers", "transformers"}
    assert len(fifth) == len(seeded.FIFTH) >= 10
    assert not fifth & (others | bench)
    assert seeded.SETS["fifth"] is seeded.FIFTH


def test_sixth_packages_are_in_no_other_group():
    """The sixth set measures generalisation too: none of its packages is in another group,
    linted by ecosystem.py (any list), timed by bench_lint.py or left out of an earlier set."""
    sixth = {p.name.lower().replace("_", "-") for p in seeded.SIXTH}
    listed = (*seeded.PACKAGES, *seeded.HELDOUT, *seeded.FRESH, *seeded.FOURTH, *seeded.FIFTH,
              *seeded.ecosystem.PACKAGES)
    others = {p.name.lower().replace("_", "-") for p in listed}
    bench = {"timm", "accelerate", "ultralytics", "lightning", "diffusers", "transformers"}
    left_out = {"espnet", "allennlp", "torchdrug", "deepctr-torch", "pytorch-ood", "chgnet", "torchkeras",
                "textattack", "fair-esm", "mace-torch", "robustbench", "trojanzoo", "setfit", "torchxrayvision",
                "torchcrepe", "baal", "fuxictr", "gfpgan", "realesrgan", "stylegan2-pytorch", "tez", "torchbearer",
                "cellpose", "imitation", "rl-games", "bert-score", "openprompt", "audiocraft", "elegantrl",
                "torchmeta", "torchsde"}
    assert len(sixth) == len(seeded.SIXTH) >= 10
    assert not sixth & (others | bench | left_out)
    assert seeded.SETS["sixth"] is seeded.SIXTH


#: packages the held-out to sixth sets' sections of benchmarks/README.md looked at and left out
LEFT_OUT_BEFORE_7 = {"espnet", "allennlp", "torchdrug", "deepctr-torch", "pytorch-ood", "chgnet", "torchkeras",
    "textattack", "fair-esm", "mace-torch", "robustbench", "trojanzoo", "setfit", "torchxrayvision",
    "torchcrepe", "baal", "fuxictr", "gfpgan", "realesrgan", "stylegan2-pytorch", "tez", "torchbearer",
    "cellpose", "imitation", "rl-games", "bert-score", "openprompt", "audiocraft", "elegantrl",
    "torchmeta", "torchsde", "clinicadl", "deepecho", "farm", "mbrl", "open-metric-learning", "pythae",
    "skrl", "torch-points3d", "torchgan", "agilerl", "compressai", "hyperimpute", "ivadomed", "lungmask",
    "openunmix", "pytorch-adapt", "supar", "torchtuples", "trankit", "dglke", "easyocr", "momentfm",
    "schnetpack", "textbrewer", "clip-benchmark", "rlcard", "salesforce-merlion"}


def test_seventh_packages_are_in_no_other_group():
    """The seventh set measures generalisation too: none of its packages is in another group,
    linted by ecosystem.py (any list), timed by bench_lint.py or left out of an earlier set."""
    seventh = {p.name.lower().replace("_", "-") for p in seeded.SEVENTH}
    listed = (*seeded.PACKAGES, *seeded.HELDOUT, *seeded.FRESH, *seeded.FOURTH, *seeded.FIFTH, *seeded.SIXTH,
              *seeded.ecosystem.PACKAGES)
    others = {p.name.lower().replace("_", "-") for p in listed}
    bench = {"timm", "accelerate", "ultralytics", "lightning", "diffusers", "transformers"}
    assert len(seventh) == len(seeded.SEVENTH) >= 10
    assert not seventh & (others | bench | LEFT_OUT_BEFORE_7)
    assert seeded.SETS["seventh"] is seeded.SEVENTH


def test_eighth_packages_are_in_no_other_group():
    """The eighth set measures generalisation too: none of its packages is in another group,
    linted by ecosystem.py (any list), timed by bench_lint.py or left out of an earlier set."""
    eighth = {p.name.lower().replace("_", "-") for p in seeded.EIGHTH}
    listed = (*seeded.PACKAGES, *seeded.HELDOUT, *seeded.FRESH, *seeded.FOURTH, *seeded.FIFTH, *seeded.SIXTH,
              *seeded.SEVENTH, *seeded.ecosystem.PACKAGES)
    others = {p.name.lower().replace("_", "-") for p in listed}
    bench = {"timm", "accelerate", "ultralytics", "lightning", "diffusers", "transformers"}
    left_out = LEFT_OUT_BEFORE_7 | {"imagededup", "neuraloperator", "nncf", "pytorch-fid", "super-gradients",
                                    "torch-fidelity", "torcheeg", "unimol-tools", "parallel-wavegan", "lava-dl",
                                    "aitlas"}
    assert len(eighth) == len(seeded.EIGHTH) >= 10
    assert not eighth & (others | bench | left_out)
    assert seeded.SETS["eighth"] is seeded.EIGHTH


ALIGN = '''def evaluate(detector, loader, device):
    detector.model.to(device)
    for x, y in loader:
        y = y.to(device)
        scores = detector(x.to(device))
        metrics.update(scores, y.to(scores.device))


def twice(model, loader, device):
    model.to(device)
    for source, target in loader:
        source = source.to(device)
        target = target.to(device)
        loss = crit(model(source.to(device)), target)


def stage(self, strategy, loader):
    for inputs in loader:
        x = inputs[0].to(strategy.device)
        y = inputs[1].to(strategy.device)
        loss = F.cross_entropy(strategy.model(x), y)
'''


def test_no_mutant_where_the_item_is_moved_again_or_only_aligned_with_a_result():
    found = {(m.line, m.shape) for m in seeded.mutants_of("pkg", "align.py", ALIGN, wide=True)}
    assert (5, "call arg") in found  # detector(x.to(device)) -> detector(x): a bug
    assert not {line for line, _ in found} & {4, 6}  # y moved again at 6; y.to(scores.device) aligns two results
    assert {(19, "y = e.to(d)"), (20, "y = e.to(d)")} <= found  # a parameter's device is a placement
    assert (13, "x = x.to(d)") in found and not {line for line, _ in found} & {12, 14}  # model(source.to(d)) moves again


CPU = '''def fit(self, loader):
    device = torch.device("cpu")
    model = Net().to(device)
    for x, y in loader:
        x = x.to(device)
        y = y.to(device)
        loss = crit(model(x), y)
'''


def test_no_mutant_where_the_model_is_on_the_cpu_or_the_output_follows_the_item():
    assert seeded.mutants_of("pkg", "cpu.py", CPU, wide=True) == []
    follows = CPU.replace('"cpu"', '"cuda"').replace("crit(model(x), y)", "crit(model(x).to(y.device), y)")
    assert {m.line for m in seeded.mutants_of("pkg", "cpu.py", follows, wide=True)} == {5}  # the output follows y
    assert {m.line for m in seeded.mutants_of("pkg", "cpu.py", CPU.replace('"cpu"', '"cuda"'), wide=True)} == {5, 6}


CACHED_HELDOUT = [p for p in seeded.HELDOUT if (seeded.ecosystem.CACHE / "src" / f"{p.name}-{p.version}" / ".done").exists()]


@pytest.mark.skipif(not CACHED_HELDOUT, reason="no held-out package cached: run python benchmarks/seeded.py --set heldout once")
def test_heldout_run_reports_apart(capsys):
    names = ",".join(p.name for p in CACHED_HELDOUT[:2])
    assert seeded.main(["--offline", "--set", "heldout", "--only", names, "--budget", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("set: heldout (wide shapes)\n") and "DEV111 findings on the unmutated files: 0" in out
    assert not any(p.name in out for p in seeded.PACKAGES)  # the tuned-on packages stay out of it


def test_no_mutant_of_a_move_stored_as_a_constructor_field():
    """``State(lengths=t.to(d))`` stores the tensor in an object (gliner 0.2.29's
    ``_PersistentBatchState``): removing the move seeds no bug there; ``model(x=t.to(d))`` does."""
    text = (
        "def step(model, loader, device):\n"
        "    model.to(device)\n"
        "    for x, counts in loader:\n"
        "        out = model(x.to(device))\n"
        "        state = _BatchState(positions=counts.to(device), out=out)\n"
        "        model.decode(state, hidden=counts.to(device))\n"
    )
    found = {(m.line, m.shape) for m in seeded.mutants_of("pkg", "s.py", text)}
    assert (5, "call arg") not in found
    assert (4, "call arg") in found and (6, "call arg") in found
