"""The distributed check's processes: starting one child process per rank, watching their
phases, stopping them, and collecting what each saved; or, under torchrun, gathering the
results of the ranks torchrun started.

Processes are always cleaned up: each rank runs in its own process group (POSIX) and dies
with its parent (Linux ``PR_SET_PDEATHSIG``); on any error or timeout devlint dumps the
stacks of the ranks still running (``faulthandler``), then sends SIGTERM, then SIGKILL to
the rank and everything it started. The rendezvous is a ``FileStore`` in a fresh temporary
folder, so no fixed port is ever used (gloo's own connections take ports the OS assigns)."""

from __future__ import annotations

import dataclasses
import datetime
import faulthandler
import multiprocessing as mp
import os
import pickle
import re
import signal
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from multiprocessing.connection import wait as _wait_for

import torch

from .ddp_rank import Job, rank_work
from .names import first_line

__all__ = ["DEFAULT_TIMEOUT", "STARTUP_TIMEOUT", "ERROR_GRACE", "PHASES", "DONE", "Launch", "launch_ranks",
           "joined_launch", "user_frame"]


#: Seconds one rank may take for its step (forward, backward, optimizer step, the FSDP run)
#: once every rank has joined the process group and built the step.
DEFAULT_TIMEOUT = 60.0


#: Seconds allowed, on top of ``timeout``, for starting the processes, joining the process
#: group and building the step (a spawned rank imports torch: seconds on a slow machine).
STARTUP_TIMEOUT = 120.0


#: After the first rank fails, seconds to wait for the others' errors before stopping them.
ERROR_GRACE = 0.5


#: The process group's own timeout is longer than devlint's, so that devlint sees a hang
#: (and can say where each rank waits) before gloo/NCCL turns it into an error.
_PG_MARGIN = 30.0


PHASES = ["not started", "starting", "joining the process group", "building the step",
           "wrapping the model in DDP", "forward (loss_fn)", "backward", "optimizer step",
           "FSDP forward (loss_fn)", "FSDP backward", "FSDP optimizer step", "saving results",
           "done"]


_P = {name: i for i, name in enumerate(PHASES)}


_STEP = _P["forward (loss_fn)"]


DONE = _P["done"]


def _child_setup(rank: int, job: Job) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(job.world_size),
                      LOCAL_WORLD_SIZE=str(job.world_size))
    if sys.platform.startswith("linux") and "GLOO_SOCKET_IFNAME" not in os.environ \
            and os.path.exists("/sys/class/net/lo"):
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # every rank is on this machine
    if hasattr(os, "setpgid"):
        try:
            os.setpgid(0, 0)  # so devlint can stop the rank and anything it starts
        except OSError:
            pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with devlint
        except Exception:  # noqa: BLE001 - best effort
            pass
    try:
        os.dup2(2, 1)  # the user's prints go to stderr, never into devlint's report
    except OSError:
        pass
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // job.world_size))
    stacks = open(os.path.join(job.folder, f"stack{rank}.txt"), "w")  # noqa: SIM115 - kept open
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    else:  # pragma: no cover - Windows: dump once shortly before devlint gives up
        faulthandler.dump_traceback_later(job.timeout + STARTUP_TIMEOUT - 1, file=stacks)


def _save(out: dict, folder: str, rank: int) -> None:
    path = os.path.join(folder, f"rank{rank}.pt")
    torch.save(out, path + ".tmp")
    os.replace(path + ".tmp", path)


def _worker(rank: int, job: Job, phases, release) -> None:
    """One rank: join the group, build the step, run it under DDP (then FSDP), save results."""
    out: dict = {"rank": rank, "error": None}
    code = 0
    phase = _P["starting"]
    try:
        phases[rank] = phase
        _child_setup(rank, job)
        import torch.distributed as dist

        phases[rank] = phase = _P["joining the process group"]
        device = torch.device("cuda", rank) if job.device == "cuda" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(job.backend, init_method="file://" + os.path.join(job.folder, "store"),
                                rank=rank, world_size=job.world_size,
                                timeout=datetime.timedelta(seconds=job.timeout + _PG_MARGIN))

        def mark(name, prefix=""):
            nonlocal phase
            phases[rank] = phase = _P[prefix + name]

        rank_work(rank, job, device, mark, out)
        phases[rank] = phase = _P["saving results"]
        _save(out, job.folder, rank)
        phases[rank] = DONE
    except BaseException as exc:  # noqa: BLE001 - every failure of a rank is reported
        code = 1
        out.update(error=first_line(exc), phase=PHASES[phase], where=user_frame(exc.__traceback__),
                   traceback="".join(traceback.format_exception(exc)[-12:]))
        for k in ("grads", "after", "fsdp"):
            out.pop(k, None)
        try:
            _save(out, job.folder, rank)
        finally:
            phases[rank] = -phase
    finally:
        # Stay alive until devlint has seen every rank: a rank that exits early turns the
        # others' hang into a "connection closed" error and hides where they wait.
        release.wait(job.timeout + STARTUP_TIMEOUT)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


_OURS = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(torch.__file__)),
         os.path.dirname(os.path.abspath(os.__file__)))


def user_frame(tb) -> str | None:
    """``file.py:LINE in FUNC`` of the innermost traceback frame outside torch, devlint's
    runtime and the standard library."""
    where = None
    for frame in traceback.extract_tb(tb):
        path = os.path.abspath(frame.filename)
        if not path.startswith(_OURS):
            where = f"{os.path.basename(path)}:{frame.lineno} in {frame.name}"
    return where


_STACK_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def _stack_summary(text: str) -> str | None:
    """Where a rank waits, from a faulthandler dump: the innermost torch call and user frame."""
    blocks = re.split(r"^(?:Current thread|Thread) 0x[0-9a-f]+", text, flags=re.M)
    block = next((b for b in blocks if "in _worker" in b), text)
    frames = _STACK_LINE.findall(block)  # most recent call first
    # a forked rank's stack continues into devlint's launcher in the parent: stop at _worker
    frames = frames[:next((i for i, f in enumerate(frames) if f[2] == "_worker"), len(frames))]
    if not frames:
        return None
    user = next((f for f in frames if not os.path.abspath(f[0]).startswith(_OURS)), None)
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    api = next((f for f in frames if os.path.abspath(f[0]).startswith(torch_dir)), None)
    parts = []
    if api:
        rel = os.path.relpath(os.path.abspath(api[0]), os.path.dirname(torch_dir))
        parts.append(f"in {rel[:-3].replace(os.sep, '.')}.{api[2]}")
    if user:
        parts.append(f"called from {os.path.basename(user[0])}:{user[1]} in {user[2]}")
    return " ".join(parts) or None


@dataclass
class Launch:
    results: list  # per rank: the saved dict, or None
    phases: list  # per rank: the last phase index (negative: it failed there)
    exitcodes: list
    timed_out: bool = False
    stacks: dict = field(default_factory=dict)  # rank -> where it waited
    pids: list = field(default_factory=list)
    seconds: float = 0.0


def _signal_group(p, sig) -> None:
    """Send ``sig`` to rank ``p`` and the processes it started (its process group)."""
    if hasattr(os, "killpg"):
        try:
            os.killpg(p.pid, sig)
            return
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.kill(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(procs) -> None:
    """SIGTERM, then SIGKILL, to each rank's process group; reap every rank. Called before
    any rank is reaped, so each group id still names that rank's group."""
    for p in procs:
        _signal_group(p, signal.SIGTERM)
    for p in procs:
        p.join(2.0)
        if p.exitcode is None:
            _signal_group(p, getattr(signal, "SIGKILL", signal.SIGTERM))
            p.join(5.0)


def launch_ranks(job: Job, start_method: str) -> Launch:
    if start_method != "fork":
        job = dataclasses.replace(job, source=None, batch=None,
                                  payload=pickle.dumps((job.source, job.batch)))
    ctx = mp.get_context(start_method)
    ws = job.world_size
    phases = ctx.Array("i", ws, lock=False)
    release = ctx.Event()
    procs: list = []
    t0 = time.monotonic()
    ph = [0] * ws
    timed_out = False
    stacks: dict = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            for rank in range(ws):
                p = ctx.Process(target=_worker, args=(rank, job, phases, release),
                                name=f"devlint-rank-{rank}", daemon=True)
                p.start()
                procs.append(p)
                if hasattr(os, "setpgid"):
                    try:  # the rank does the same; whichever runs first wins the race
                        os.setpgid(p.pid, p.pid)
                    except OSError:
                        pass
        step_start = failed_at = None
        while True:
            now = time.monotonic()
            ph = list(phases)
            if all(v == DONE for v in ph):
                break
            ended = set(_wait_for([p.sentinel for p in procs], timeout=0))  # ends, does not reap
            dead = [i for i, p in enumerate(procs) if p.sentinel in ended and ph[i] != DONE]
            if any(v < 0 for v in ph) or dead:
                failed_at = failed_at or now
                if now - failed_at >= ERROR_GRACE or all(v < 0 or v == DONE for v in ph):
                    break
            if step_start is None and all(abs(v) >= _STEP for v in ph):
                step_start = now
            deadline = step_start + job.timeout if step_start else t0 + STARTUP_TIMEOUT + job.timeout
            if now >= deadline:
                timed_out = True
                break
            _wait_for([p.sentinel for p in procs if p.sentinel not in ended],
                      timeout=min(0.05, deadline - now))
        ph = list(phases)
        ended = set(_wait_for([p.sentinel for p in procs], timeout=0))
        running = [i for i, p in enumerate(procs)
                   if p.sentinel not in ended and ph[i] != DONE and ph[i] >= 0]
        if running and hasattr(signal, "SIGUSR1"):
            for i in running:  # ask the ranks still at work where they are
                try:
                    os.kill(procs[i].pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
            time.sleep(0.3)
            for i in running:
                try:
                    with open(os.path.join(job.folder, f"stack{i}.txt")) as f:
                        stacks[i] = _stack_summary(f.read())
                except OSError:
                    pass
        release.set()
        if not running:  # let finished ranks exit on their own before stopping stragglers
            until = time.monotonic() + 5.0
            while len(_wait_for([p.sentinel for p in procs], timeout=0)) < len(procs) \
                    and time.monotonic() < until:
                time.sleep(0.01)
    finally:
        release.set()
        _stop(procs)
    results = []
    for rank in range(ws):
        try:
            results.append(torch.load(os.path.join(job.folder, f"rank{rank}.pt"), weights_only=True))
        except Exception:  # noqa: BLE001 - a rank that died before saving
            results.append(None)
    return Launch(results, ph, [p.exitcode for p in procs], timed_out, stacks,
                   [p.pid for p in procs], time.monotonic() - t0)


def joined_launch(job: Job) -> Launch | None:
    """This process as one rank of a job torchrun started (:mod:`devlint.runtime.torchrun`):
    run its part (:func:`rank_work`) in the process group already joined, then gather every
    rank's results on rank 0. Returns the launch on rank 0, None on the other ranks. A rank
    that hangs is stopped by the process group's own timeout (``torchrun.JOIN_TIMEOUT``)."""
    import torch.distributed as dist

    rank, ws = dist.get_rank(), dist.get_world_size()
    t0 = time.monotonic()
    out: dict = {"rank": rank, "error": None}
    phase = [_P["building the step"]]

    def mark(name, prefix=""):
        phase[0] = _P[prefix + name]

    device = torch.device("cuda", torch.cuda.current_device()) if job.device == "cuda" else torch.device("cpu")
    try:
        rank_work(rank, job, device, mark, out)
        out["phase_index"] = DONE
    except Exception as exc:  # noqa: BLE001 - every failure of a rank is reported
        out.update(error=first_line(exc), phase=PHASES[phase[0]], where=user_frame(exc.__traceback__),
                   traceback="".join(traceback.format_exception(exc)[-12:]), phase_index=-phase[0])
        for k in ("grads", "after", "fsdp"):
            out.pop(k, None)
    results = [None] * ws if rank == 0 else None
    dist.gather_object(out, results, dst=0)
    if rank != 0:
        return None
    phases = [r.pop("phase_index") if r else 0 for r in results]
    return Launch(results, phases, [0] * ws, False, {}, [], time.monotonic() - t0)
