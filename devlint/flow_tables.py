"""The tables the device dataflow (:mod:`devlint.dataflow`) reads: torch names and callee names.

Which torch factories allocate on the CPU, which tensor methods read a value out or keep the
device, which module methods return the module, and the name patterns that say "a model", "a
loss" or "a batch item kept on the CPU by design". :mod:`devlint.precheck_cpu_flow` keeps copies
of some of them (``tests/test_precheck.py`` holds them equal).
"""

from __future__ import annotations

import re

from .batches import ITERATING_WRAPPERS

#: ``torch.set_default_device(x)`` with ``x`` not the literal "cpu", or a CUDA default tensor type.
_DEFAULT_DEVICE = re.compile(r"set_default_device\(\s*(?![\"']cpu[\"']\s*\))|set_default_tensor_type\([^)]*cuda")
#: torch factories that allocate on the default (CPU) device unless given ``device=``.
FACTORIES = frozenset(
    "zeros ones empty full arange range randn rand randint randperm eye linspace logspace "
    "normal bernoulli multinomial tril_indices triu_indices".split()
)
DTYPES = frozenset(
    "float16 half bfloat16 float32 float float64 double int8 uint8 int16 short int32 int int64 long "
    "bool complex64 cfloat complex128 cdouble float8_e4m3fn float8_e5m2".split()
)
#: Methods of a tensor whose result is no tensor (or not one on the same device).
_READOUTS = frozenset(
    "item tolist numpy size dim numel ndimension nelement element_size data_ptr get_device stride "
    "is_contiguous is_floating_point storage untyped_storage keys __len__ type".split()
)
_VIEWS = frozenset("T mT H mH data real imag grad".split())
#: tensor methods giving a tensor on the same device (a batch given one of them is one tensor)
_TENSOR_OPS = frozenset(
    "permute view reshape transpose float double half bfloat16 long int bool byte squeeze unsqueeze contiguous "
    "flatten clone detach narrow expand repeat flip roll t".split()
)
_TENSOR_META = frozenset("shape device dtype ndim is_cuda requires_grad layout names".split())
#: Methods of a module that return the module itself.
_SELF_METHODS = frozenset("eval train float half double bfloat16 requires_grad_ share_memory".split())
_PASSTHROUGH_ITER = frozenset({"tqdm", "iter", "list", "tuple", "sorted", "reversed"}) | ITERATING_WRAPPERS
#: ``model.generate(...)`` and the like call the model (RULES.md DEV111)
_MODEL_METHODS = frozenset({"generate", "forward", "encode"})
#: wrappers that keep the placement of the module they wrap (DataParallel scatters: not here)
_KEEPING_WRAPPERS = frozenset({"compile", "DistributedDataParallel", "FullyShardedDataParallel"})
LEGACY_CONSTRUCTORS = frozenset(
    "Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor ShortTensor CharTensor ByteTensor BoolTensor".split()
)
_JOINS = frozenset({"stack", "cat", "concat", "concatenate", "vstack", "hstack", "dstack"})
#: callee names that say "a model" (for a parameter or an attribute the linter cannot see)
#: names that say "a device" (``device``, ``dev``, ``gpu_id``, ``local_rank``), never a tensor of a batch
_DEVICE_NAME = re.compile(r"device|(^|_)(dev|gpu|gpus|cuda|rank|accelerator)(_|$)", re.I)
#: names of a run's configuration, whose ``.device`` is the chosen device, not where a value lies
_CONFIG_NAME = re.compile(r"(args|arg|cfg|config|conf|opt|opts|options|hparams|hp|params|settings|trainer|accelerator|fabric|env|ctx)$", re.I)
_MODEL_CALLEE = re.compile(
    r"(^|_)(model|models|net|network|module|mods|encoder|decoder|backbone|classifier|generator|discriminator|"
    r"transformer|unet|student|teacher|policy|critic|actor|detector|segmenter|autoencoder|vae|gan)s?$",
    re.I,
)
#: names of a loop's counters (``iteration``, ``global_step``, ``epoch``): numbers the loop
#: counts, never items of a batch (a comparison of them is a Python bool or a 0-dim tensor)
_COUNTER_NAME = re.compile(
    r"^((global|cur|curr|current|total|num|n|i|train)_)?(step|steps|iter|iters|iteration|iterations|epoch|epochs)$", re.I
)


def _not_item_name(name: str) -> bool:
    """Does a step function's parameter name say it is no item of the batch: a model, a device,
    a run's configuration (``cfg``, ``args``) or a loop counter (``iteration``)?"""
    return bool(_MODEL_CALLEE.search(name) or _DEVICE_NAME.search(name) or _CONFIG_NAME.match(name) or _COUNTER_NAME.match(name))


#: callee names that say "a loss" (``criterion(out, y)``), not a helper computing one
#: (a criterion named for what it compares, ``criterion_cls``, ``criterion_gep_gepc``, is one too)
_LOSS_CALLEE = re.compile(
    r"^_*(\w+_)?(loss|criterion|crit)(_?(fn|func|fct|fcn|function|module|mod))?(_(train|eval|val|valid|test))?$"
    r"|^_*(criterion|crit)_\w+$",
    re.I,
)
#: a loss class built and called in one expression (``nn.CrossEntropyLoss()(out, y)``,
#: ``FrobeniusNormLoss()(est, igt)``): the last part of the constructor's dotted name
_LOSS_CLASS = re.compile(r"^[A-Z]\w*Loss$")
_HELPER_PREFIX = re.compile(r"^(compute|calc|calculate|get|eval|evaluate|run|do|make|build|update|step|train|log)_", re.I)
#: batch items that are CPU-side by design (``pack_padded_sequence`` lengths) or not tensors
_CPU_SIDE_ITEMS = frozenset(
    "len lens length lengths size sizes shape shapes count counts meta metas metadata info infos name names path paths "
    "file files filename filenames fname fnames idx index indices key keys text texts caption captions "
    "sentence sentences prompt prompts question questions answer answers str string strings word words raw uid uids url urls "
    "mode modes".split()
)
#: of those, the names of raw text: one the file itself moves to a device holds token ids there
_TEXT_ITEMS = frozenset("text texts caption captions sentence sentences prompt prompts word words".split())
#: ``texts.to(device)``, ``texts = texts.cuda()``: a move of a name (not a dtype cast)
_NAME_MOVE = re.compile(r"\b(\w+)\.(?:to\((?!\s*(?:dtype\s*=|torch\.(?:float|half|bfloat|double|long|int|bool|uint)))|cuda\()")
#: the move of :data:`_NAME_MOVE` without the name before it (searched from its ``.``, far
#: faster than from every word), and the run of word characters that ends where it starts
_MOVE_CALL = re.compile(r"\.(?:to\((?!\s*(?:dtype\s*=|torch\.(?:float|half|bfloat|double|long|int|bool|uint)))|cuda\()")
_WORD_END = re.compile(r"\w+\Z")
_LONGEST_ITEM = max(map(len, _TEXT_ITEMS))


def moved_text_items(text: str) -> frozenset[str]:
    """The :data:`_TEXT_ITEMS` (lower case) that ``text`` moves by name: the names ``n`` of
    ``_NAME_MOVE.findall(text)`` with ``n.lower()`` one of them. A match of that pattern is a
    whole run of word characters followed by a move (the ``\\b`` and the greedy ``\\w+``; a
    shorter run would need a ``.`` inside a word), so the runs before each move are those
    names; only the last characters of a run are read, one more than the longest item has
    (lower-casing never shortens a word)."""
    found = set()
    for move in _MOVE_CALL.finditer(text):
        at = move.start()
        # a longer name is read as its last characters, one more than any item has: no item
        word = _WORD_END.search(text, max(at - _LONGEST_ITEM - 1, 0), at)
        if word is not None and word.group().lower() in _TEXT_ITEMS:
            found.add(word.group().lower())
    return frozenset(found)


_SCATTERS = ("DataParallel", "DistributedDataParallel")
#: methods of a module that are no forward pass
_MODULE_API = frozenset(
    "to cuda cpu apply train eval parameters named_parameters modules named_modules children named_children "
    "state_dict load_state_dict register_buffer register_parameter register_forward_hook register_forward_pre_hook "
    "register_full_backward_hook add_module zero_grad requires_grad_ half float double bfloat16 type get_submodule "
    "get_parameter get_buffer buffers named_buffers extra_repr share_memory save_pretrained resize_token_embeddings "
    "get_input_embeddings get_output_embeddings config device dtype".split()
)
#: the training entry of the scikit-learn estimator API that model wrappers copy (skorch,
#: pytorch-tabnet, pyod, opendataval's models): ``new_model.fit(x, y)`` runs a whole training
#: loop over the data as it comes (often CPU tensors or arrays on purpose) and places it itself;
#: no submodule of the model is called. Not ``predict``: a module's own ``predict(batch)``
#: computes where its parameters are (recbole's recommenders)
_ESTIMATOR_API = frozenset("fit partial_fit fit_predict fit_transform".split())
#: callees that keep or show their arguments without computing with them
_NOT_COMPUTING = frozenset(
    "append extend insert add update put set setdefault get pop extend len print str repr format isinstance "
    "type id hash dict list tuple set zip enumerate range sorted min max any all getattr setattr hasattr "
    "cpu numpy item tolist detach clone to cuda size dim float int bool info debug warning error "
    # a tensor's own methods whose arguments are sizes or dimensions (x.expand(n, k)), not tensors
    "view reshape expand repeat permute transpose narrow unsqueeze squeeze flatten split chunk "
    # calls that hand their arguments to another callable, to run elsewhere or later (the
    # target, ``Thread(target=producer, args=(data, slicers, q))``, is judged where it is defined)
    "Thread Process Timer partial submit apply_async map_async".split()
)
_MODULE_NAME = re.compile(r"(model|net|module|encoder|decoder|backbone|classifier)", re.I)
_SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "Optional[int]", "Optional[float]", "Optional[bool]"})
