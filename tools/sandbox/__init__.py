"""Running untrusted code (model output): the executor protocol and a local sandbox.

A tool-using explorer runs whatever Python or shell the model wrote. That code
must not be able to take the host down, read the run's API keys, reach the
network, or change anything outside its workspace, and it must never make the
parent wait forever. This module gives:

* :class:`CodeExecutor`, the lifecycle protocol (``start`` / ``execute`` /
  ``aexecute`` / ``shutdown``) every backend implements, so a container or a
  remote sandbox can replace the local one without touching the tools;
* :class:`ExecRequest`, :class:`SandboxLimits` and :class:`ExecResult`, the
  plain values that cross that protocol;
* :class:`LocalSandbox`, the default backend: a subprocess on this machine.

Modules, one concept each: :mod:`.limits` (what a call may use),
:mod:`.values` (request, result, isolation report), :mod:`.errors`,
:mod:`.protocol` (the executor lifecycle), :mod:`.paths` (host paths the
sandbox needs, refused workspaces), :mod:`.local` (the backend),
:mod:`.supervise` (the parent side of one call), :mod:`.launcher` (the child
side, run as a script) and :mod:`.workspace_copy` (the workspace into and out
of the sandbox's tmpfs).

Ordinary outcomes of running code are *results*, not exceptions: a time-out,
a crash, output cut at the cap or a blown memory limit come back as an
:class:`ExecResult` the model can read and react to. Exceptions are for the
sandbox itself (see :class:`SandboxError`).

How :class:`LocalSandbox` contains the code (Linux only)
--------------------------------------------------------
The parent starts a small launcher (:mod:`.launcher`, run with ``python -I
-S``) in a new session, so one ``killpg`` reaches everything it spawns. The
launcher holds ``PR_SET_PDEATHSIG`` (SIGKILL), so it dies with the parent
even when the parent is SIGKILLed, and its init and code die with it. The
launcher, as root, enters new **mount, PID, IPC and network namespaces**
(``unshare(2)`` through ``ctypes``; Python 3.11 has no ``os.unshare``), then:

* mounts a **size-limited tmpfs over the workspace**
  (:attr:`SandboxLimits.max_workspace_bytes`, default 256 MiB, and a bounded
  inode count) and copies the workspace in; after the call, once every
  process of it is dead, copies the result back (:mod:`.workspace_copy`). The
  code never writes the host filesystem, so it cannot fill the disk (nor the
  blocks it reserves for root or ``resuid``). Only what the sandbox uid could
  read on the host is copied in; the rest (a root-owned 0600 file, say) is
  neither visible nor replaced, and nothing on the host is ever chowned;
* gives the code a **root of its own** (``pivot_root``, the host's root
  detached): a small tmpfs holding read-only binds of ``/usr`` (``/bin``,
  ``/sbin`` and ``/lib*`` as on the host, links into it or binds), the
  loader's cache, the time zone and ``/etc/alternatives``, the
  interpreter's executable directory, prefixes and package directories
  (``site-packages``, a ``.pth`` overlay's too; never other ``sys.path``
  entries such as an editable install's source tree), ``/dev/null``,
  ``zero``, ``full``, ``random`` and ``urandom``, an ``/etc/hosts`` for
  ``localhost``, an empty ``/tmp``, a fresh ``/proc``, and the workspace
  tmpfs at the workspace's own path. The plan is made in the parent
  (:func:`.paths.root_plan`) and refuses an interpreter whose directory
  would show ``/``, a system directory or a home whole. Everything is
  read-only except the workspace and a small private tmpfs on ``/dev/shm``:
  the code can write its workspace and nothing else, and can *read* nothing
  of the host but what runs it: not the dataset being graded, not the
  eval's results file, not a home directory, not the project tree, not
  ``/etc/passwd`` (``TMPDIR`` and ``HOME`` point at the workspace). The
  same holds when an ordinary user starts the sandbox (the code then runs
  as that user, whose files it can no more see than anyone's);
* runs the code as the PID namespace's second process under a tiny init (PID 1)
  that reaps orphans; when the code's main process exits, the init exits and
  the kernel kills every process left in the namespace, so a background
  grandchild cannot outlive the call or hold the output pipes open, even
  after ``setsid``. A fresh ``/proc`` shows only the sandbox's processes,
  and init adds up their resident anonymous memory every 25 ms and kills
  them all when the sum passes :attr:`SandboxLimits.max_total_memory_bytes`;
* leaves the network namespace with only a loopback interface (brought up,
  so servers *inside* the sandbox can talk to each other), which is checked
  before the code runs: no route to the host's loopback or anywhere else;
* drops privileges in the code's process: ``setgroups([])``, ``setgid`` and
  ``setuid`` to ``nobody`` (65534), then a user namespace of its own mapping
  only that uid, with every capability dropped. Not being root is what makes
  ``RLIMIT_NPROC`` bite (the kernel never enforces it for root) and keeps the
  code from undoing the mounts; the own user namespace makes that process
  budget per sandbox (Linux >= 5.14 counts it per user namespace), so one
  explorer's fork bomb cannot starve its siblings. ``PR_SET_NO_NEW_PRIVS``
  stops set-uid programs from giving privileges back;
* sets the resource limits (``setrlimit``) of :class:`SandboxLimits`: CPU
  time, address space, processes, file size and open files, no core dumps,
  and ``oom_score_adj`` 1000 so that if the host ever runs short of memory
  the kernel kills sandboxed code first;
* keeps the sandbox's init out of the code's reach: it holds no host
  directory open and is not dumpable, so code running as the same uid (a
  sandbox started by an ordinary user) can neither ptrace it nor open its
  ``/proc/1/fd``, ``root`` or ``environ``;
* gives the code a **scrubbed environment**: only ``PATH`` (system
  directories, after the sandbox Python's own ``bin``), ``LANG``, ``HOME``
  and ``TMPDIR`` (both the workspace), ``PYTHONDONTWRITEBYTECODE``,
  ``PYTHONUNBUFFERED`` and ``TERM``, plus what the caller passes explicitly
  as ``extra_env``. Nothing is inherited, so no API key or token leaks;
  stdin is a private in-memory file, so a large stdin can never deadlock.

The parent enforces wall time and output size itself: it reads stdout and
stderr with ``selectors`` (never blocking on a full pipe), stops at the
output cap, and on time-out sends ``SIGTERM`` then, after a short grace,
``SIGKILL`` to the sandbox's init (the whole PID namespace dies with it),
then gives the launcher up to 30 s to copy the workspace back before it
kills the whole process group. It waits on a pidfd, not on EOF, and every
wait is bounded, so the parent always returns. Workspaces that are ``/``, a
system directory, or a home directory (or hold one) are refused.

Started by an ordinary user instead of root, the launcher enters a new user
namespace first (unprivileged user namespaces are on by default on Debian)
and drops every capability before running the code, which then runs as that
user; everything else above holds. Only the standard library and the Linux
system calls are used: no setuid helper, no package to install.

What is not contained (documented, not hidden)
----------------------------------------------
* The code can **read** what its root holds: the system's programs and
  libraries under ``/usr`` and the interpreter's installation (its venv and
  site-packages). A secret stored *inside* those (a package that bundles a
  dataset, a key in a venv) is readable. Inside its user namespace, files of
  other users show as owned by 65534 (the kernel's overflow id); that is
  display only.
* Abstract Unix sockets are isolated by the network namespace; filesystem
  sockets are not in the root at all.
* Memory: each process is limited by ``RLIMIT_AS`` (``memory_bytes``), and
  the call as a whole by init's watchdog (``max_total_memory_bytes``), which
  is *polled*: between two looks (25 ms) the processes can allocate past the
  cap (bounded by ``max_processes * memory_bytes``) before they are all
  killed. It counts ``RssAnon`` (heap, stacks, private mappings; pages shared
  after ``fork`` once per process), not file pages, not the kernel's own
  memory for the processes (page tables, sockets, pipes), and not the two
  tmpfs mounts, which have caps of their own: the workspace
  (``max_workspace_bytes``, which lives in memory) and ``/dev/shm``
  (``shm_bytes``). So a call uses at most about ``max_total_memory_bytes +
  max_workspace_bytes + shm_bytes``, plus one polling interval's worth of
  allocation and kernel overhead. There is no cgroup: the cgroup v2 hierarchy
  of the machines this was built on has no memory controller (only
  ``hugetlb``), and the v1 memory hierarchy belongs to whoever runs the
  machine. ``oom_score_adj`` 1000 makes the sandbox the first victim should
  the host still run short.
* The wall-time limit bounds the code; copying a changed workspace back
  (at most ``max_workspace_bytes``) comes after it, bounded by 30 s.
* The code may create user namespaces of its own (as any unprivileged process
  can): they give it nothing over the host, but they are kernel attack surface.
* ``memory`` and ``file_size`` in :attr:`ExecResult.killed_by` are inferred
  from the program's own error output when it failed with an error rather
  than a signal (Python turns both into exceptions).
* When the namespaces or the root cannot be created (no ``CAP_SYS_ADMIN`` and
  no user namespaces, e.g. some containers, a kernel without
  ``mount_setattr``, or a host root ``pivot_root`` refuses, such as an
  initramfs), there is no network, filesystem or PID isolation. By default
  (:attr:`SandboxLimits.require_isolation`) the sandbox then refuses to run
  (:class:`SandboxUnavailableError`) before any code runs; with
  ``require_isolation=False`` it runs with the rlimits, the scrubbed
  environment and the privilege drop only (a grandchild that calls
  ``setsid`` may then outlive the call; the workspace is the host directory,
  without size cap, handed to the sandbox uid where that uid could already
  read it; an interpreter that uid cannot reach, such as a venv under
  ``/root``, then cannot start: a :class:`SandboxExecutionError`), and says
  so in :attr:`ExecResult.isolation` (``network_isolated`` and
  ``workspace_limited`` are False, and so on).
"""

from __future__ import annotations

from .errors import SandboxError, SandboxExecutionError, SandboxUnavailableError
from .limits import DEFAULT_SANDBOX_GID, DEFAULT_SANDBOX_UID, MIB, SandboxLimits
from .local import LocalSandbox
from .paths import check_workdir
from .protocol import BaseCodeExecutor, CodeExecutor
from .values import ExecRequest, ExecResult, Isolation, Language

__all__ = [
    "DEFAULT_SANDBOX_GID",
    "DEFAULT_SANDBOX_UID",
    "MIB",
    "BaseCodeExecutor",
    "CodeExecutor",
    "ExecRequest",
    "ExecResult",
    "Isolation",
    "Language",
    "LocalSandbox",
    "SandboxError",
    "SandboxExecutionError",
    "SandboxLimits",
    "SandboxUnavailableError",
    "check_workdir",
]
