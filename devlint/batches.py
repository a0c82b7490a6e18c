"""How training loops name and fetch their batches: the words DEV111 reads as "a batch".

Shared by the dataflow (:mod:`devlint.dataflow`) and the ``ast`` pre-check
(:mod:`devlint.precheck`), which must agree on them. Taken from the loops of the pinned
packages ``benchmarks/seeded.py`` mutates (d2l, torchtune, speechbrain, ...) and from the
public reports of issue 25: a step function's ``batch`` parameter, ``loader.next_batch()``,
``metric_logger.log_every(loader, ...)``.
"""

from __future__ import annotations

import re

#: parameters that hold one batch (a dict, tuple or object of tensors) in a step function
#: (``def train_step(model, batch, device)``); never one tensor's name (``x``, ``images``)
BATCH_PARAMS = frozenset({"batch", "minibatch", "mini_batch", "batch_data", "data_batch", "inputs", "sample"})

#: a call that hands out the next batch of a loader the linter cannot see:
#: ``loader.next_batch()``, ``self.get_batch("train")``, ``sampler.sample_batch()``
BATCH_CALL = re.compile(r"^_?(next|get|sample|fetch|load|read|draw)_(\w+_)?batch$|^next_batch\w*$")

#: calls that iterate what their first argument yields, unchanged (progress bars, loggers)
ITERATING_WRAPPERS = frozenset({"log_every", "track", "progress_bar", "trange_over", "tqdm_notebook"})

#: a helper named for handing out batches (``make_batches(...)``, ``build_loader(cfg)``,
#: ``self._skipgram_sample_pairs(X)``)
_BATCHES_CALL = re.compile(r"batch|loader|(^|_)samples?(_|$)", re.I)
#: an object named for handing out batches, whatever its method is called (``self.sampler.sample(X)``)
_BATCHER = re.compile(r"(sampler|loader|batcher)s?$", re.I)


def batch_call(name: str) -> bool:
    """Does a loop over a call of ``name`` (dotted: ``self.sampler.sample``) iterate batches: a
    helper named for batches, a loader or samples (``make_batches``, ``build_loader``,
    ``sample_pairs``), or a method of an object named for handing them out (a sampler, a loader,
    a batcher)?"""
    parts = name.rsplit(".", 2)
    return bool(name) and bool(_BATCHES_CALL.search(parts[-1]) or len(parts) > 1 and _BATCHER.search(parts[-2]))
