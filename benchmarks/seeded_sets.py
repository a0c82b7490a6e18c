"""The package groups ``seeded.py`` mutates: ``PACKAGES`` (ecosystem.py's ``DEVELOPED`` and ``EXTRA``, the set
DEV111 is tuned on), ``HELDOUT`` (validation only), ``FRESH`` (a third group, measured once
before any tuning on it) and ``FOURTH`` to ``EIGHTH`` (a fourth to an eighth, likewise). Each is pinned and fetched at run time by
``ecosystem.fetch`` into ``benchmarks/.cache/`` (never committed); ``why`` says what it trains.
"""
from __future__ import annotations

import ecosystem

#: packages with training loops beyond ecosystem.py's (fetched the same way)
EXTRA = [
    ecosystem.Package("pytorch-tabnet", "4.1.0", why="abstract_model.py: fit/predict loops, .to(device) of batches"),
    ecosystem.Package("flair", "0.15.1", why="trainers and model forward passes: batches moved to flair.device"),
    ecosystem.Package("simpletransformers", "0.70.8", why="train/eval loops of many task models: batch items moved"),
    ecosystem.Package("avalanche-lib", "0.6.0", why="continual-learning strategies: mini-batch moves, eval loops"),
    ecosystem.Package("torchattacks", "3.5.1", why="adversarial attacks: images and labels moved to the model's device"),
    ecosystem.Package("pytorch-widedeep", "1.7.0", why="training/ trainers: fit and predict loops over batches"),
    ecosystem.Package("pytorch-metric-learning", "2.9.0", why="trainers and testers: embeddings of moved batches"),
    ecosystem.Package("torchensemble", "0.2.0", why="ensemble fit/evaluate loops, one per method"),
    ecosystem.Package("pykeen", "1.11.1", why="training loops of knowledge-graph embedding models"),
]
PACKAGES = ecosystem.DEVELOPED + EXTRA
#: held out: training scripts and trainers kept for validation of DEV111 (never tuned on).
#: Mutated with the wider shapes too (``wide``); ``--set heldout`` reports them on their own.
HELDOUT = [
    ecosystem.Package("opacus", "1.6.0", sdist=True, keep=r"^examples/", why="examples/: mnist, cifar10, imdb, char-lstm scripts"),
    ecosystem.Package("learn2learn", "0.2.0", sdist=True, keep=r"^examples/", why="examples/: meta-learning scripts, .cuda() and tuple moves"),
    ecosystem.Package("pytorch_warmup", "0.2.0", sdist=True, keep=r"^examples/", why="examples/: emnist and cifar10 train/test loops"),
    ecosystem.Package("torch-optimizer", "0.3.0", sdist=True, keep=r"^examples/", why="examples/mnist.py: the classic train/test loop"),
    ecosystem.Package("yolov5", "7.0.14", why="train.py, val.py, classify/ and segment/: detection and classification scripts"),
    ecosystem.Package("open_clip_torch", "3.3.0", keep=r"^open_clip_train/", why="open_clip_train/: train_one_epoch, evaluate, zero-shot"),
    ecosystem.Package("torchreid", "0.2.5", sdist=True, why="engine/: trainer classes, if self.use_gpu: imgs = imgs.cuda()"),
    ecosystem.Package("laplace-torch", "0.3", why="fit loops over a loader, model on self._device"),
    ecosystem.Package("deepod", "0.4.1", keep=r"^deepod/models/(tabular|time_series)/", why="fit loops of anomaly detectors"),
    ecosystem.Package("pyod", "3.6.7", why="models/: torch fit/decision loops, .to(self.device).float()"),
    ecosystem.Package("torch-rechub", "0.9.0", why="trainers/: recommendation training loops"),
    ecosystem.Package("stanza", "1.15.0", why="models/*/trainer.py: NLP trainers moving batch items"),
    ecosystem.Package("chemprop", "1.6.1", why="train/: train and predict loops of molecule models"),
    ecosystem.Package("segmentation-models-pytorch", "0.2.1", why="utils/train.py: TrainEpoch/ValidEpoch"),
    ecosystem.Package("facenet-pytorch", "2.6.0", why="models/utils/training.py: pass_epoch"),
    ecosystem.Package("advertorch", "0.2.3", sdist=True, keep=r"^advertorch_examples/", why="tutorial_train_mnist.py: clean and adversarial training"),
    ecosystem.Package("cleverhans", "3.0.1", sdist=True, keep=r"^cleverhans_tutorials/.*pytorch", why="mnist_tutorial_pytorch.py: a .cuda() training loop"),
    ecosystem.Package("cleanlab", "2.0.0", keep=r"^cleanlab/experimental/", why="experimental/mnist_pytorch.py: if self.cuda: data.cuda()"),
    ecosystem.Package("brevitas", "0.13.4", keep=r"^brevitas_examples/(?!stable_diffusion)",
                      why="brevitas_examples/: BNN trainer, ImageNet and super-resolution train/validate loops"),
    ecosystem.Package("sparseml", "1.8.0", keep=r"^sparseml/pytorch/torchvision/", why="torchvision/train.py: the torchvision reference train/evaluate loops"),
    ecosystem.Package("fairscale", "0.4.13", sdist=True, keep=r"^benchmarks/", why="benchmarks/: FSDP, MoE and pipe training scripts, .cuda() moves"),
]
#: fresh: a third group, in neither set above nor in ecosystem.py's DEVELOPED or bench_lint.py
#: (its AUDITED, added later, lints sentence-transformers 6.3.0, whose v3 rewrite replaced the
#: 2.2.2 fit loop measured here), chosen on
#: 2026-12-02 for loops written outside the usual trainer frameworks (education, spiking nets,
#: conformal prediction, adversarial robustness, graphs, chemistry); its recall was measured
#: before DEV111 was changed for it, as the generalisation number. Wide shapes, like HELDOUT.
FRESH = [
    ecosystem.Package("EduCDM", "1.0.1", why="cognitive-diagnosis models: train/eval loops moving user, item and knowledge ids"),
    ecosystem.Package("adversarial-robustness-toolbox", "1.20.1", why="PyTorch estimators' fit loops and attacks' batch moves"),
    ecosystem.Package("cogdl", "0.6", why="graph model wrappers and models: batches moved to the model's device"),
    ecosystem.Package("deepchem", "2.8.0", why="models/torch_models: fit and predict loops of molecule models"),
    ecosystem.Package("easyfsl", "1.5.0", why="utils.py: few-shot evaluation over support/query tasks"),
    ecosystem.Package("norse", "1.1.0", sdist=True, why="norse/task/: spiking-network MNIST/CIFAR training scripts"),
    ecosystem.Package("pykt-toolkit", "0.0.38", why="pykt/models: knowledge-tracing train/evaluate loops, dict batches"),
    ecosystem.Package("spikingjelly", "2.0.0", why="activation_based/examples: spiking-network training scripts"),
    ecosystem.Package("torchcp", "1.2.1", why="conformal predictors and their trainers: calibration and training loops"),
    ecosystem.Package("snntorch", "1.0.0", why="backprop.py: BPTT training loops"),
    ecosystem.Package("recbole", "1.2.1", why="trainer/: recommender training and evaluation loops"),
    ecosystem.Package("sentence-transformers", "2.2.2", sdist=True, why="SentenceTransformer.fit: the pre-v3 training loop"),
    ecosystem.Package("pyro-ppl", "1.9.2", sdist=True, why="contrib/: SVI loops over data moved with .cuda()"),
]
#: fourth: a fourth group, in no list above nor in ecosystem.py (DEVELOPED, AUDITED) or
#: bench_lint.py, nor in the second precision audit's list of the same afternoon; chosen on
#: 2026-12-02 for hand-written loops in other domains (federated learning, adversarial training
#: and graph defenses, graph generation, data valuation, pathology, synthetic tabular and
#: time-to-event data, drift detection, recommenders, detection, NER, Hessian analysis, KANs).
#: Its recall was measured on main before DEV111 was changed for it. Wide shapes, like HELDOUT.
FOURTH = [
    ecosystem.Package("fedml", "0.8.18", why="ml/trainer and simulation/: federated clients' train/test loops"),
    ecosystem.Package("deeprobust", "0.2.11", why="image/defense: adversarial training loops; graph/: GNN fit loops"),
    ecosystem.Package("dive-into-graphs", "1.1.0", why="ggraph/method: graph-generation training loops, .cuda() moves"),
    ecosystem.Package("opendataval", "1.3.0", why="model/api.py fit loops and DVRL's predictor training"),
    ecosystem.Package("slideflow", "2.3.1", why="mil/clam: pathology MIL train/validate loops; model/torch.py"),
    ecosystem.Package("synthcity", "0.2.12", why="plugins/core/models: generators' and time-to-event models' fit loops"),
    ecosystem.Package("alibi-detect", "0.13.0", why="models/pytorch/trainer.py and learned-kernel drift detectors"),
    ecosystem.Package("recpack", "0.3.6", why="algorithms/: BPRMF, GRU4Rec, Prod2Vec training loops"),
    ecosystem.Package("pytorchyolo", "1.8.0", why="train.py: the YOLOv3 training loop"),
    ecosystem.Package("gliner", "0.2.29", why="model.py: NER evaluation and prediction over batches"),
    ecosystem.Package("pyhessian", "0.1", why="hessian.py: Hessian-vector products over a loader"),
    ecosystem.Package("pykan", "0.2.8", why="kan/MLP.py: the fit loop of the MLP baseline"),
]
#: fifth: a fifth group, in no list above nor in ecosystem.py (DEVELOPED, AUDITED, AUDITED2) or
#: bench_lint.py; chosen on 2026-12-02 for loops in libraries the other sets do not touch
#: (knowledge distillation, single-cell foundation models, Bayesian layers' examples, speech
#: synthesis, LM evaluation, imaging inverse problems, representation similarity, drift
#: detection, drug-target interaction, tabular GANs, spiking-network pipelines). Its recall was
#: measured on main before DEV111 was changed for it. Wide shapes, like HELDOUT.
FIFTH = [
    ecosystem.Package("kd-lib", "0.0.32", why="KD/: distillers' train_teacher/train_student/evaluate loops"),
    ecosystem.Package("scgpt", "0.2.4", why="trainer.py and model/: single-cell training and evaluation loops, dict batches"),
    ecosystem.Package("bayesian-torch", "0.5.0", sdist=True, why="bayesian_torch/examples/: MNIST train/test scripts"),
    ecosystem.Package("coqui-tts", "0.28.0", why="TTS/bin/ scripts and models: speaker-encoder training, attention masks"),
    ecosystem.Package("lm-eval", "0.4.13", why="lm_eval/models: log-likelihood and generation loops over batches"),
    ecosystem.Package("deepinv", "0.5.0", why="training/ and examples/: reconstruction networks' loops"),
    ecosystem.Package("torch-cka", "0.21", why="cka.py: feature comparison over two loaders"),
    ecosystem.Package("torchdrift", "0.1.0.post1", why="utils/experiments.py: drift-detector evaluation loops"),
    ecosystem.Package("DeepPurpose", "0.1.5", sdist=True, why="DTI.py: drug-target interaction train/test loops"),
    ecosystem.Package("ctgan", "0.12.1", why="synthesizers/: CTGAN and TVAE fit loops"),
    ecosystem.Package("bindsnet", "0.3.4", why="pipeline/: spiking-network environment and dataloader pipelines"),
]
#: sixth: a sixth group, in no list above nor in ecosystem.py (DEVELOPED, AUDITED, AUDITED2),
#: bench_lint.py or the sets' "left out" lists in benchmarks/README.md; chosen on 2026-12-03 for
#: loops in domains the other sets do not touch (point-cloud registration, simulation-based
#: inference, graph anomaly detection, relation extraction, tabular prior-fitted networks, NLP
#: adversarial attacks, time-series forecasting, single-file RL, contrastive neural embeddings,
#: speech enhancement, calibration, molecular-dynamics time series). Its recall was measured on
#: main before DEV111 was changed for it. Wide shapes, like HELDOUT.
SIXTH = [
    ecosystem.Package("learning3d", "0.2.2", why="examples/: point-cloud registration and classification train/test scripts"),
    ecosystem.Package("sbi", "0.27.0", why="inference/trainers: neural posterior/likelihood/ratio estimators' training loops"),
    ecosystem.Package("pygod", "1.1.0", why="detector/: graph outlier detectors' fit and decision loops"),
    ecosystem.Package("deepke", "2.2.6", why="relation_extraction/few_shot: hand-written train/eval steps of relation models"),
    ecosystem.Package("tabpfn", "0.1.10", why="train.py and scripts/: prior-fitted network training and evaluation"),
    ecosystem.Package("OpenAttack", "2.1.1", why="attackers/: NLP attacks running victim classifiers on moved batches"),
    ecosystem.Package("chronos-forecasting", "2.3.2", why="chronos2/pipeline.py: forecasting over batches of context"),
    ecosystem.Package("cleanrl", "0.4.8", sdist=True, why="cleanrl/*.py: single-file RL training scripts"),
    ecosystem.Package("cebra", "0.6.1", why="solver/ and integrations/: contrastive embedding training and decoders"),
    ecosystem.Package("deepfilternet", "0.5.6", why="df/train.py: speech-enhancement training loop"),
    ecosystem.Package("netcal", "1.4.0", why="scaling/ and regression/gp: calibration models' fit loops"),
    ecosystem.Package("deeptime", "0.5.0", why="decomposition/deep: time-lagged autoencoder and VAMPnet fit loops"),
]
#: seventh: a seventh group, in no list above nor in ecosystem.py (DEVELOPED, AUDITED, AUDITED2),
#: bench_lint.py or the sets' "left out" lists in benchmarks/README.md; chosen on 2026-12-03 for
#: loops in domains the other sets do not touch (tabular anomaly-detection baselines, late-interaction
#: retrieval, recommenders, federated clients, RLHF trainers, formula OCR, data valuation,
#: aspect-based sentiment, computational pathology, bio-image segmentation and self-training).
#: Its recall was measured on main before DEV111 was changed for it. Wide shapes, like HELDOUT.
SEVENTH = [
    ecosystem.Package("adbench", "0.1.11", why="baseline/: deep anomaly detectors' fit and predict loops"),
    ecosystem.Package("colbert-ai", "0.2.22", why="colbert/training and modeling: late-interaction retrieval training"),
    ecosystem.Package("cornac", "3.0.1", why="models/: torch recommenders' fit and scoring loops"),
    ecosystem.Package("daisyRec", "2.3.0", sdist=True, why="daisy/model: recommenders' fit loops over user/item/label batches"),
    ecosystem.Package("fedlab", "1.3.0", sdist=True, why="contrib/ and core/: federated clients' local training loops"),
    ecosystem.Package("openrlhf", "0.11.2", why="trainer/: reward-model, SFT and DPO training steps"),
    ecosystem.Package("pix2tex", "0.1.4", why="train.py and eval.py: formula OCR training and evaluation"),
    ecosystem.Package("pyDVL", "0.10.0", why="influence/torch: data-valuation loops over loaders"),
    ecosystem.Package("pyabsa", "2.4.2", why="tasks/*/trainer: aspect-based sentiment trainers' train/evaluate loops"),
    ecosystem.Package("tiatoolbox", "2.1.3", why="models/: pathology model engines' inference over batches"),
    ecosystem.Package("torch-em", "0.10.9", why="trainer/: bio-image segmentation trainers"),
]
#: eighth: an eighth group, in no list above nor in ecosystem.py (DEVELOPED, AUDITED, AUDITED2),
#: bench_lint.py or the sets' "left out" lists in benchmarks/README.md; chosen on 2026-12-03 for
#: loops in domains the other sets do not touch (neural topic models, semi-supervised learning,
#: active learning for text, quantitative finance, particle physics, AutoML forecasting,
#: healthcare prediction, cryo-EM reconstruction, spatial single-cell mapping, protein
#: interaction, learning to rank, molecule generation). Its recall was measured on main before
#: DEV111 was changed for it. Wide shapes, like HELDOUT.
EIGHTH = [
    ecosystem.Package("contextualized-topic-models", "2.5.0", why="models/ctm.py: topic-model fit, validation and prediction loops, .cuda() of bag-of-words batches"),
    ecosystem.Package("semilearn", "0.3.2", why="core/algorithmbase.py and algorithms/: semi-supervised train and evaluate loops, .cuda(gpu)"),
    ecosystem.Package("small-text", "1.4.1", why="integrations/: active-learning text classifiers' fit and predict loops"),
    ecosystem.Package("pyqlib", "0.9.7", why="contrib/model/pytorch_*: stock-return models' train and test epochs over loaders"),
    ecosystem.Package("weaver-core", "0.4.17", why="utils/nn/tools.py: particle-physics jet taggers' train and evaluate loops"),
    ecosystem.Package("autoPyTorch", "0.2.1", sdist=True, why="training/trainer: AutoML forecasting trainers' steps, network predict"),
    ecosystem.Package("pyhealth", "1.1.6", why="models/ and calib/: healthcare models and calibration over batches"),
    ecosystem.Package("cryodrgn", "3.4.3", why="commands/: cryo-EM reconstruction training and evaluation over minibatches"),
    ecosystem.Package("scarches", "0.6.1", why="models/sagenet: spatial single-cell mapping, graph classifier train/eval"),
    ecosystem.Package("dscript", "0.2.8", why="commands/train.py: protein-interaction training over embedded pairs"),
    ecosystem.Package("allrank", "1.4.3", why="inference/: learning-to-rank scoring over slate batches"),
    ecosystem.Package("molsets", "0.3.1", why="char_rnn/trainer.py: molecule-generation training over SMILES batches"),
]
SETS = {"default": PACKAGES, "heldout": HELDOUT, "fresh": FRESH, "fourth": FOURTH, "fifth": FIFTH, "sixth": SIXTH, "seventh": SEVENTH,
        "eighth": EIGHTH, "all": PACKAGES + HELDOUT + FRESH + FOURTH + FIFTH + SIXTH + SEVENTH + EIGHTH}
