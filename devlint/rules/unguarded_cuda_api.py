"""DEV105: a ``torch.cuda`` call that raises without CUDA, outside a guard.

Which calls raise was checked on torch 2.13's CPU build (RULES.md DEV105, revised turn 3): the
memory counters ``memory_allocated``, ``max_memory_allocated``, ``memory_reserved``,
``max_memory_reserved`` and ``memory_stats`` return 0 or an empty dict there and are left alone;
``reset_peak_memory_stats``, ``mem_get_info``, ``get_device_capability`` and ``memory_summary``
raise.
"""

from __future__ import annotations

import libcst as cst

from ..guards import _HELPER, AVAILABILITY
from ..precheck import surely_guarded_calls
from ..rule import Rule

_RAISING = frozenset(
    {
        "synchronize", "set_device", "current_device", "get_device_name", "get_device_properties",
        "get_device_capability", "reset_peak_memory_stats", "reset_max_memory_allocated",
        "mem_get_info", "memory_summary", "Event", "Stream", "current_stream", "default_stream",
        "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
        "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
    }
)


class UnguardedCudaApi(Rule):
    """A `torch.cuda` call that raises on a machine without CUDA, outside a guard."""

    code = "DEV105"
    name = "unguarded-cuda-api"
    message = "torch.cuda.{api}() raises without CUDA: guard it with is_available()"

    @staticmethod
    def candidate(facts) -> bool:
        """Pre-check: a call that may resolve to one of the raising ``torch.cuda`` functions and
        is not surely guarded (in the body of ``if torch.cuda.is_available():`` or of ``if
        is_cuda_available():``, see :func:`devlint.precheck.surely_guarded_calls`)."""
        calls = facts.calls_to(f"torch.cuda.{api}" for api in _RAISING)
        if not calls:
            return False
        guarded = surely_guarded_calls(facts, _HELPER, AVAILABILITY)
        return any(id(call) not in guarded for call in calls)

    what_it_does = """
Flags calls of the `torch.cuda` API that raise when CUDA is absent — `synchronize`,
`set_device`, `current_device`, `get_device_name`, `get_device_properties`,
`get_device_capability`, `mem_get_info`, `reset_peak_memory_stats`, `memory_summary`, `Event`,
`Stream` and the legacy typed constructors (`torch.cuda.FloatTensor`, ...) — outside an
availability guard. `is_available`, `device_count`, `manual_seed(_all)`, `empty_cache` and the
memory counters (`memory_allocated`, `max_memory_allocated`, `memory_reserved`,
`max_memory_reserved`, `memory_stats`: 0 or an empty dict without CUDA) are safe and left
alone; `torch.cuda.amp.*` is DEV206's."""
    why_bad = """
These calls initialise CUDA and raise `AssertionError: Torch not compiled with CUDA enabled`
(or `RuntimeError: No CUDA GPUs are available`) on a CPU-only machine, often in timing or
logging code that the program does not need there."""
    flagged = (
        '''import time
start = time.perf_counter()
torch.cuda.synchronize()  # expect: DEV105
torch.cuda.reset_peak_memory_stats()  # expect: DEV105
''',
    )
    clean = (
        '''import time
start = time.perf_counter()
if torch.cuda.is_available():
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
torch.cuda.manual_seed_all(0)
print("peak", torch.cuda.max_memory_allocated() / 2**20, "MiB")  # 0 without CUDA
''',
    )
    fix_safety = "This rule has no autofix."

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        name = self.ctx.resolve(node.func)
        if name and name.startswith("torch.cuda.") and name[11:] in _RAISING:
            self.report(node, self.fitted(self.message.format(api=name[11:]), f"torch.cuda.{name[11:]}() raises without CUDA: guard it"))
