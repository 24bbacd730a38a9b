"""Worker processes that die with the process that started them, so ``kill -9`` of a run leaves no orphan.

Why this is needed: a pool worker blocks reading its task pipe. When its owner is killed with SIGKILL, nothing runs
in the owner to stop the pool, and the pipe never reaches end-of-file because every sibling worker (and, under
``forkserver``, the server itself) still holds a copy of its write end. The workers wait for ever: ~190 MB each,
``processes`` of them per killed run (issue 21). So each worker arranges its own death when it starts:

* a **direct child** (``fork`` and ``spawn`` start methods, ``subprocess``) asks the kernel for SIGKILL when its
  parent dies (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``). The request can come too late, when the parent died
  between ``fork`` and ``prctl``; the worker then has another parent already (init or a subreaper), so
  :func:`die_with` compares ``getppid()`` with the owner's pid *after* arming the signal and kills itself on a
  mismatch. That closes the race.
* a child of multiprocessing's **forkserver** has the server, not its owner, as parent. It arms the parent-death
  signal too (it dies if the server dies) and watches the owner from a daemon thread that waits on a pidfd of the
  owner (a poll loop where pidfds are missing). The forkserver exits by itself once its last client is gone — the
  owner and every worker hold the write end of its "alive" pipe — so once the workers are dead it follows them.

Use it as a pool initializer with the owner's pid (``initializer=die_with, initargs=(os.getpid(),)``), first thing in
a child started with ``subprocess``, or, for pools that third-party code creates without an initializer hook,
:func:`fork_children_die_with_me` (an at-fork hook: every child this process forks arms the same protection).

Note: ``PR_SET_PDEATHSIG`` fires when the parent *thread* that created the child exits. Pools here are created and
shut down by one call on one thread (``with pool:``), so the thread outlives its workers. Platforms without
``prctl`` (macOS) rely on the watcher thread alone. No prefect, no torch: this runs in every worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import sys
import threading
import time

log = logging.getLogger("polysent.pipelines.workers")

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# looked up at import, in the parent: a child forked from a threaded process must not dlopen (the loader's lock may be
# held by a thread that did not come along)
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
_POLL_SECONDS = 0.5  # watcher poll interval where pidfd_open is unavailable
_forker_pid: int | None = None  # the pid of the process that is forking (set by the at-fork "before" hook)
_hooked = False


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm_parent_death_signal() -> bool:
    """Ask the kernel to SIGKILL this process when its parent (thread) dies; False where ``prctl`` is unavailable."""
    if _PRCTL is None:
        return False
    if _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}")
    return True


def _watch(owner: int) -> None:
    """Block until ``owner`` has exited, then kill this process."""
    try:
        fd = os.pidfd_open(owner)
    except ProcessLookupError:
        _die()
        return
    except (AttributeError, OSError):  # no pidfd (old kernel, not Linux): poll
        while True:
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                _die()
            except PermissionError:  # alive, but another user's: cannot happen for our own owner
                pass
            time.sleep(_POLL_SECONDS)
    with contextlib.suppress(OSError):
        select.select([fd], [], [])  # a pidfd turns readable when the process exits
    _die()


def die_with(owner: int) -> None:
    """Make this (freshly started) worker die when process ``owner`` dies, however it dies (``kill -9`` included).

    Call it first thing in the worker. If ``owner`` is already gone, the worker kills itself now.
    """
    armed = arm_parent_death_signal()
    parent = os.getppid()
    if armed and parent == owner:
        return  # the kernel watches the owner from now on; had it died before prctl, parent would differ
    if parent == owner or parent != 1:  # no prctl, or a forkserver's child (or reparented to a subreaper)
        with contextlib.suppress(ProcessLookupError):
            os.kill(owner, 0)  # the owner must be alive now ...
            threading.Thread(target=_watch, args=(owner,), name=f"die-with-{owner}", daemon=True).start()
            return  # ... and a thread watches it
    _die()  # the owner died before the signal was armed (we were reparented to init), or it is gone


def _before_fork() -> None:
    global _forker_pid
    _forker_pid = os.getpid()


def _after_fork_in_child() -> None:
    if _forker_pid is not None:
        die_with(_forker_pid)


def fork_children_die_with_me() -> None:
    """From now on, every child this process forks (and their forked children) dies with its parent.

    For pools created by code that offers no initializer hook (wikipedia2vec's training pools): an
    ``os.register_at_fork`` hook arms :func:`die_with` in each child. Registered once per process; forked children
    inherit the hook, so each dies with its own parent.
    """
    global _hooked
    if _hooked:
        return
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
    _hooked = True
