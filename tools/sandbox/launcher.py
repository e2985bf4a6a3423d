"""The child side of :class:`~.local.LocalSandbox`: set up containment, then become the code.

This file runs as a script (``python -I -S -B launcher.py --pacore-sandbox-launch
CONFIG_FD STATUS_FD PARENT_PID``), once per execution, single-threaded, with
the standard library only: its imports are paid on every call and it must not
import the package (the interpreter may not even see it). The parent sends a
JSON configuration on ``CONFIG_FD`` and reads JSON status lines from
``STATUS_FD``. See the package docstring for what each step contains.

Process tree of one call::

    parent (Python, supervises)  <- the launcher dies with it (PR_SET_PDEATHSIG)
      launcher  (new mount/PID/IPC/net namespaces; copies the workspace in and back)
        init    (PID 1 of the namespace: reaps, watches total memory)
          code  (unprivileged, rlimits, scrubbed environment)
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import importlib.util
import json
import os
import platform
import resource
import select
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any, NoReturn

__all__ = ["LAUNCH_FLAG", "total_anon_bytes"]

LAUNCH_FLAG = "--pacore-sandbox-launch"
"""argv[1] of a launcher run; anything else makes this file do nothing."""

# How often init adds up the memory of the call's processes.
_MEMORY_POLL_S = 0.025

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_NOEXEC = 0x8
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR_NOSUID = 0x2
_MOUNT_ATTR_NODEV = 0x4
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_SYS_MOUNT_SETATTR = 442  # same number on x86_64, arm64 and every asm-generic arch
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "loongarch64": 41}
_MNT_DETACH = 2
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1

#: Device nodes of the sandbox's /dev, bound from the host's, and the links beside them.
_DEVICES = ("null", "zero", "full", "random", "urandom")
_DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
#: The sandbox's /etc/hosts: servers inside it may talk to each other as "localhost".
_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


class _SetupError(Exception):
    def __init__(self, stage: str, message: str, *, terminal: bool) -> None:
        super().__init__(message)
        self.stage = stage
        self.terminal = terminal


class _Status:
    """JSON lines to the parent over a private pipe (closed on exec of the code)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, **event: Any) -> None:
        data = (json.dumps(event) + "\n").encode()
        with contextlib.suppress(OSError):
            while data:
                data = data[os.write(self.fd, data) :]

    def fail(self, stage: str, message: str, *, terminal: bool) -> NoReturn:
        self.send(event="error", stage=stage, message=message, terminal=terminal)
        os._exit(125)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str
) -> None:
    result = libc.mount(
        source.encode() if source is not None else None,
        target.encode(),
        fstype.encode() if fstype is not None else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    _check(result, f"mount {target}")


def _mount_setattr(
    libc: ctypes.CDLL, path: str, flags: int, *, attr_set: int = 0, attr_clr: int = 0
) -> None:
    if platform.machine() not in ("x86_64", "aarch64", "arm64", "riscv64", "loongarch64"):
        raise OSError(errno.ENOSYS, "mount_setattr: unknown syscall number on this machine")
    attr = _MountAttr(attr_set=attr_set, attr_clr=attr_clr, propagation=0, userns_fd=0)
    result = libc.syscall(
        ctypes.c_long(_SYS_MOUNT_SETATTR),
        ctypes.c_int(_AT_FDCWD),
        ctypes.c_char_p(path.encode()),
        ctypes.c_uint(flags),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(result, f"mount_setattr {path}")


def _prctl(libc: ctypes.CDLL, option: int, arg: int = 0) -> None:
    zero = ctypes.c_ulong(0)
    _check(libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), zero, zero, zero), "prctl")


def _only_loopback() -> bool:
    """Verify the network namespace: loopback and nothing else, and bring loopback up."""
    names = [name for _, name in socket.if_nameindex()]
    if names != ["lo"]:
        return False
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, _SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))
    return True


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _workspace_copy() -> ModuleType:
    """The copy helpers, loaded by path: the launcher does not import the package."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workspace_copy.py")
    spec = importlib.util.spec_from_file_location("_pacore_workspace_copy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Workspace:
    """The host workspace (a descriptor taken before any mount) and its tmpfs stand-in.

    ``copy`` is :mod:`workspace_copy`, loaded before any mount too: once an
    unsearchable directory holding this checkout is covered (see
    ``paths.covers``), its files are out of reach.
    """

    def __init__(self, host_fd: int, copy: ModuleType) -> None:
        self.host_fd = host_fd
        self.copy = copy
        self.tmpfs_fd: int | None = None
        self.hidden: set[str] = set()

    def drop_tmpfs(self) -> None:
        """Forget the tmpfs (its mount was undone): nothing is copied back from it."""
        if self.tmpfs_fd is not None:
            os.close(self.tmpfs_fd)
            self.tmpfs_fd = None

    def close(self) -> None:
        """Close both descriptors (in the sandbox's init, which must hold no host directory)."""
        self.drop_tmpfs()
        os.close(self.host_fd)


def _mount_workspace(
    libc: ctypes.CDLL,
    cfg: Mapping[str, Any],
    workspace: _Workspace,
    notes: list[str],
    target: str,
) -> None:
    """Mount the size-capped tmpfs at ``target`` and copy the host workspace's content in."""
    workdir = cfg["workdir"]
    size = int(cfg["max_workspace_bytes"])
    inodes = max(1024, size // 16384)  # empty files cost memory (and copying) too
    _mount(
        libc, "tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV,
        f"size={size},nr_inodes={inodes},mode=0755",
    )  # fmt: skip
    tmpfs_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    workspace.tmpfs_fd = tmpfs_fd
    uid, gid = cfg["uid"], cfg["gid"]
    owner = (int(uid), int(gid)) if uid is not None else None
    if owner is not None:
        os.fchown(tmpfs_fd, *owner)
    copy = workspace.copy
    try:
        workspace.hidden = copy.copy_in(workspace.host_fd, tmpfs_fd, uid=uid, gid=gid, owner=owner)
    except copy.WorkspaceTooLarge as exc:
        raise _SetupError(
            "workspace",
            f"workspace {workdir} does not fit into max_workspace_bytes={size}: {exc.strerror}",
            terminal=False,
        ) from exc
    except OSError as exc:
        raise _SetupError("workspace", f"cannot copy {workdir} in: {exc}", terminal=False) from exc
    if workspace.hidden:
        notes.append(f"{len(workspace.hidden)} workspace entries hidden from the code")


def _isolate(libc: ctypes.CDLL, cfg: Mapping[str, Any], workspace: _Workspace) -> dict[str, Any]:
    """Enter the namespaces and lock the filesystem down; report what worked."""
    notes: list[str] = []
    want_net = not cfg["network"]
    as_root = os.geteuid() == 0
    flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | (_CLONE_NEWNET if want_net else 0)
    if not as_root:
        flags |= _CLONE_NEWUSER
    uid, gid = os.geteuid(), os.getegid()
    report: dict[str, Any] = {
        "network": False,
        "filesystem": False,
        "processes": False,
        "workspace_limited": False,
        "user_namespace": not as_root,
        "notes": notes,
    }
    if libc.unshare(ctypes.c_int(flags)) != 0:
        err = ctypes.get_errno()
        notes.append(f"cannot create namespaces: unshare: {os.strerror(err)}")
        return report
    if not as_root:
        try:
            _write_file("/proc/self/setgroups", "deny")
            _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
            _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            raise _SetupError("user namespace", str(exc), terminal=True) from exc
    try:  # nothing we mount below may propagate back to the host
        _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE, "")
    except OSError as exc:
        raise _SetupError("mount namespace", str(exc), terminal=True) from exc
    report["processes"] = True
    if want_net:
        try:
            report["network"] = _only_loopback()
            if not report["network"]:
                notes.append("network namespace has interfaces other than loopback")
        except OSError as exc:
            notes.append(f"cannot inspect the network namespace: {exc}")
    try:
        _build_root(libc, cfg, workspace, notes)
    except OSError as exc:
        notes.append(f"cannot build the sandbox's own root: {exc}")
        return report
    report["workspace_limited"] = True
    try:
        _lock_root(libc, cfg["workdir"])
        report["filesystem"] = True
    except OSError as exc:
        notes.append(f"cannot make the sandbox's root read-only: {exc}")
    return report


def _bind(libc: ctypes.CDLL, fd: int, target: str) -> None:
    """Bind the host file or directory open as ``fd`` (``O_PATH``) at ``target``, read-only."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
    _mount(libc, f"/proc/self/fd/{fd}", target, None, _MS_BIND | _MS_REC, "")
    _mount_setattr(libc, target, _AT_RECURSIVE, attr_set=_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID)


def _pivot_root(libc: ctypes.CDLL, new_root: str) -> None:
    """Make ``new_root`` this mount namespace's root and detach the host's entirely.

    ``pivot_root(".", ".")`` stacks the old root on the new one, and the lazy
    unmount then drops it: no path, ``..`` included, leads back to the host's
    files, and a mount namespace the code makes later copies none of them.
    """
    number = _SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, "pivot_root: unknown syscall number on this machine")
    os.chdir(new_root)
    dot = ctypes.c_char_p(b".")
    _check(libc.syscall(ctypes.c_long(number), dot, dot), "pivot_root")
    _check(libc.umount2(dot, ctypes.c_int(_MNT_DETACH)), "detach the host's root")
    os.chdir("/")


def _build_root(
    libc: ctypes.CDLL, cfg: Mapping[str, Any], workspace: _Workspace, notes: list[str]
) -> None:
    """Give the code a root of its own: the workspace and read-only binds, nothing else.

    The new root is a small tmpfs, mounted (in our private mount namespace)
    over the workspace's host path, which surely exists and is ours. It holds
    the binds of ``cfg["root"]`` (the system's and the interpreter's
    directories, :func:`paths.root_plan`), the host's ``/proc`` (under the
    fresh one init mounts: an unprivileged ``proc`` mount needs a visible
    one), a ``/dev`` of the usual devices, a private ``/dev/shm``, an
    ``/etc/hosts`` for ``localhost``, an empty ``/tmp`` and the workspace
    tmpfs at the workspace's own path. Then ``pivot_root`` into it. Every
    source is opened before the first mount, and the plan's symlinks are made
    last, so no step follows a path through something it made. On failure
    before the pivot the new root is undone and the host's view is back.
    """
    workdir = cfg["workdir"]
    plan = cfg["root"]
    flags = os.O_PATH | os.O_CLOEXEC
    sources = [(target, os.open(source, flags)) for target, source in plan["binds"]]
    for name in _DEVICES:
        with contextlib.suppress(OSError):
            sources.append((f"/dev/{name}", os.open(f"/dev/{name}", flags)))
    proc = os.open("/proc", flags | os.O_DIRECTORY)
    staging = workdir

    def at(path: str) -> str:
        return staging + path

    pivoted = False
    _mount(libc, "tmpfs", staging, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755")
    try:
        for target, fd in sources:
            _bind(libc, fd, at(target))
        os.makedirs(at("/proc"), mode=0o755)
        _mount(libc, f"/proc/self/fd/{proc}", at("/proc"), None, _MS_BIND | _MS_REC, "")
        os.makedirs(at("/tmp"), mode=0o755, exist_ok=True)
        os.makedirs(at("/etc"), mode=0o755, exist_ok=True)
        with open(at("/etc/hosts"), "w") as f:
            f.write(_HOSTS)
        os.makedirs(at("/dev/shm"), mode=0o755, exist_ok=True)
        size = int(cfg["shm_bytes"])
        _mount(
            libc, "tmpfs", at("/dev/shm"), "tmpfs", _MS_NOSUID | _MS_NODEV,
            f"size={size},mode=1777",
        )  # fmt: skip
        os.makedirs(at(workdir), mode=0o755, exist_ok=True)
        _mount_workspace(libc, cfg, workspace, notes, at(workdir))
        for name, target in _DEV_LINKS:
            os.symlink(target, at(f"/dev/{name}"))
        for path, target in plan["symlinks"]:
            os.makedirs(os.path.dirname(at(path)), mode=0o755, exist_ok=True)
            os.symlink(target, at(path))
        _pivot_root(libc, staging)
        pivoted = True
    except BaseException:
        if not pivoted:
            workspace.drop_tmpfs()
            with contextlib.suppress(OSError):
                os.chdir("/")
                _check(libc.umount2(staging.encode(), ctypes.c_int(_MNT_DETACH)), "umount")
        raise
    finally:
        for _, fd in sources:
            os.close(fd)
        os.close(proc)


def _lock_root(libc: ctypes.CDLL, workdir: str) -> None:
    """Make the new root read-only, all of it but the workspace and ``/dev/shm``.

    ``/proc`` stays writable: it guards itself by permissions, and the code's
    process must write its own ``/proc/self/uid_map`` (init mounts a fresh
    ``proc`` over it anyway).
    """
    _mount_setattr(libc, "/", _AT_RECURSIVE, attr_set=_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID)
    writable = _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV
    for path in (workdir, "/dev/shm"):
        _mount_setattr(libc, path, 0, attr_clr=_MOUNT_ATTR_RDONLY, attr_set=writable)
    with contextlib.suppress(OSError):
        _mount_setattr(libc, "/proc", 0, attr_clr=_MOUNT_ATTR_RDONLY)


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Leave no capability at all (needed in a user namespace, where we hold them all)."""
    for cap in range(64):
        with contextlib.suppress(OSError):
            _prctl(libc, _PR_CAPBSET_DROP, cap)
    zero = ctypes.c_ulong(0)
    clear_all = ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL)
    libc.prctl(ctypes.c_int(_PR_CAP_AMBIENT), clear_all, zero, zero, zero)  # best effort
    header = _CapHeader(version=0x20080522, pid=0)
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def _own_user_namespace(libc: ctypes.CDLL, uid: int, gid: int) -> bool:
    """Enter a user namespace of our own, mapping only ourselves (after dropping root).

    ``RLIMIT_NPROC`` is counted per user namespace (Linux >= 5.14), so this gives
    each sandbox its own process budget instead of one shared by every sandbox
    running as the same uid. The capabilities it grants inside are dropped next.
    """
    _prctl(libc, _PR_SET_DUMPABLE, 1)  # setuid made /proc/self root's; take it back
    if libc.unshare(ctypes.c_int(_CLONE_NEWUSER)) != 0:
        return False
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    return True


def _exec_code(libc: ctypes.CDLL, cfg: Mapping[str, Any], status: _Status) -> NoReturn:
    """Become the untrusted program: limits, privileges, then exec. Never returns."""
    stage = "signals"
    try:
        _prctl(libc, _PR_SET_DUMPABLE, 1)  # init is not; this process writes its own /proc
        for signum in signal.valid_signals():
            if signum not in (signal.SIGKILL, signal.SIGSTOP):
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        with contextlib.suppress(OSError):
            _write_file("/proc/self/oom_score_adj", "1000")
        stage = "stdin"
        stdin_fd = os.memfd_create("stdin", 0)
        os.write(stdin_fd, cfg["stdin"].encode("utf-8"))
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        os.dup2(stdin_fd, 0)
        os.close(stdin_fd)
        argv = list(cfg["argv"])
        if cfg["code"] is not None:
            code_fd = os.memfd_create("code", 0)
            os.write(code_fd, cfg["code"].encode("utf-8"))
            os.lseek(code_fd, 0, os.SEEK_SET)
            argv = [a.replace("{fd}", str(code_fd)) for a in argv]
        stage = "workspace"
        os.chdir(cfg["workdir"])
        stage = "limits"
        cpu = int(cfg["cpu_time_s"])
        for which, soft, hard in (
            (resource.RLIMIT_CORE, 0, 0),
            (resource.RLIMIT_CPU, cpu, cpu + 1),
            (resource.RLIMIT_AS, cfg["memory_bytes"], cfg["memory_bytes"]),
            (resource.RLIMIT_FSIZE, cfg["max_file_bytes"], cfg["max_file_bytes"]),
            (resource.RLIMIT_NOFILE, cfg["max_open_files"], cfg["max_open_files"]),
        ):
            resource.setrlimit(which, (int(soft), int(hard)))
        stage = "privileges"
        if cfg["uid"] is not None:
            os.setgroups([])
            os.setgid(int(cfg["gid"]))
            os.setuid(int(cfg["uid"]))
            if os.getresuid() != (cfg["uid"],) * 3 or os.getresgid() != (cfg["gid"],) * 3:
                raise OSError(errno.EPERM, "could not drop privileges")
            if _own_user_namespace(libc, int(cfg["uid"]), int(cfg["gid"])):
                _drop_capabilities(libc)
            else:
                status.send(
                    event="note",
                    text="process budget shared by all sandboxes of uid "
                    f"{cfg['uid']} (no user namespace)",
                )
        elif os.geteuid() != 0:
            _drop_capabilities(libc)
        # Lowered only now: a user namespace made above keeps the caller's limit as
        # its ceiling, so this budget counts this sandbox's processes alone.
        stage = "limits"
        nproc = int(cfg["max_processes"])
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1)
        stage = "exec"
        os.execve(argv[0], argv, dict(cfg["env"]))
    except (OSError, ValueError) as exc:  # ValueError: unencodable argv or environment
        terminal = stage in ("signals", "privileges")
        status.fail(stage, f"{exc}", terminal=terminal)


def total_anon_bytes(proc: str = "/proc", *, skip: int | None = None) -> int:
    """Resident anonymous memory (``RssAnon``) of every process visible in ``proc``.

    Run by init in its own ``/proc``, which shows the call's processes only.
    Anonymous memory is what a program allocates (heap, stacks, private
    mappings); shared libraries and file pages are left out, so one library
    mapped by 64 processes is not counted 64 times. A page still shared after
    ``fork`` is counted in each process that maps it: the sum can overstate,
    never understate.
    """
    total = 0
    for name in os.listdir(proc):
        if not name.isdigit() or (skip is not None and int(name) == skip):
            continue
        try:
            with open(f"{proc}/{name}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"RssAnon:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError):
            continue  # exited meanwhile, or a kernel thread without memory
    return total


def _init(libc: ctypes.CDLL, cfg: Mapping[str, Any], status: _Status, pid_ns: bool) -> NoReturn:
    """PID 1 of the sandbox: start the code, reap orphans, watch the total memory.

    When the code's processes together hold more than
    ``max_total_memory_bytes``, init kills every one of them (``kill(-1)``
    from a namespace's init reaches the whole namespace) and reports
    ``total_memory``. Without a PID namespace there is no private ``/proc``,
    so the total is not watched (the report says the isolation is incomplete).
    """
    try:
        _prctl(libc, _PR_SET_PDEATHSIG, signal.SIGKILL)
        if pid_ns:
            _mount(libc, "proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "")
    except OSError as exc:
        status.fail("proc", str(exc), terminal=True)
    # Not dumpable (from before the code exists): code running as our uid (a sandbox
    # started by an ordinary user) can neither ptrace init nor open its /proc/1/fd,
    # root or environ. The code's process takes dumpability back for itself.
    try:
        _prctl(libc, _PR_SET_DUMPABLE, 0)
    except OSError as exc:
        status.fail("init", f"cannot make init undumpable: {exc}", terminal=True)
    started = time.monotonic()
    main = os.fork()
    if main == 0:
        _exec_code(libc, cfg, status)
    limit = int(cfg["max_total_memory_bytes"])
    killed_by: str | None = None
    peak = 0
    try:
        main_fd: int | None = os.pidfd_open(main)
    except OSError:
        main_fd = None
    result: tuple[int, Any] | None = None
    while result is None:
        while True:  # reap whatever has ended, the main process included
            try:
                pid, wstatus, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                os._exit(0)
            if pid == 0:
                break
            if pid == main:
                result = (wstatus, usage)
                break
        if result is not None:
            break
        if pid_ns and killed_by is None:
            used = total_anon_bytes(skip=1)
            peak = max(peak, used)
            if used > limit:
                killed_by = "total_memory"
                with contextlib.suppress(OSError):
                    os.kill(-1, signal.SIGKILL)
        if main_fd is not None:
            select.select([main_fd], [], [], _MEMORY_POLL_S)
        else:
            time.sleep(_MEMORY_POLL_S)
    wstatus, usage = result
    event: dict[str, Any] = {
        "event": "exit",
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": time.monotonic() - started,
        "peak_anon_bytes": peak,
    }
    if killed_by is not None:
        event["killed_by"] = killed_by
    if os.WIFSIGNALED(wstatus):
        event["signal"] = os.WTERMSIG(wstatus)
    else:
        event["code"] = os.waitstatus_to_exitcode(wstatus)
    status.send(**event)
    # Exiting as PID 1 makes the kernel SIGKILL whatever the code left behind.
    os._exit(0)


def _hand_over(workdir: str, uid: int, gid: int) -> None:
    """Without a tmpfs (isolation off): let the sandbox user write the host workspace.

    Only entries it could already read are given to it: a root-owned 0600
    file stays root's and unreadable. Symlinks are never followed.
    """
    if os.lstat(workdir).st_uid != uid:
        os.chown(workdir, uid, gid, follow_symlinks=False)
    for _path, dirs, files, dirfd in os.fwalk(workdir, follow_symlinks=False):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                entry = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if entry.st_uid == uid or not (entry.st_mode & 0o004):
                    continue
                os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)


def _sync_back(workspace: _Workspace, status: _Status) -> None:
    """Mirror the tmpfs onto the host workspace once every process of the call is gone."""
    if workspace.tmpfs_fd is None:
        return
    try:
        workspace.copy.copy_out(workspace.tmpfs_fd, workspace.host_fd, workspace.hidden)
    except OSError as exc:  # WorkspaceTooDeep included: then nothing was changed
        status.send(event="sync_error", message=f"copying the workspace back failed: {exc}")
        return
    status.send(event="synced", hidden=len(workspace.hidden))


def _launcher_main(argv: list[str]) -> NoReturn:
    config_fd, status_fd, parent = int(argv[0]), int(argv[1]), int(argv[2])
    libc = _libc()
    # Die with the parent: a killed parent must not leave code running past its
    # wall time. Checked after setting, in case the parent died in between.
    _prctl(libc, _PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(125)
    os.set_inheritable(status_fd, False)
    os.umask(0o022)
    status = _Status(status_fd)
    with os.fdopen(config_fd, "rb") as f:
        cfg = json.loads(f.read().decode("utf-8"))
    try:  # taken before the mounts: the host directory, whatever covers it later
        host_fd = os.open(cfg["workdir"], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        status.fail("workspace", f"cannot open {cfg['workdir']}: {exc}", terminal=False)
    workspace = _Workspace(host_fd, _workspace_copy())
    try:
        report = _isolate(libc, cfg, workspace)
    except _SetupError as exc:
        status.fail(exc.stage, str(exc), terminal=exc.terminal)
    dropped = cfg["uid"] is not None or os.geteuid() != 0
    report["privileges_dropped"] = dropped
    report["uid"] = cfg["uid"] if cfg["uid"] is not None else os.geteuid()
    status.send(event="isolation", **report)
    complete = report["filesystem"] and report["processes"] and dropped
    if cfg["require_isolation"] and not (complete and (cfg["network"] or report["network"])):
        reasons = "; ".join(report["notes"]) or "unknown reason"
        status.fail("isolation", f"isolation unavailable: {reasons}", terminal=True)
    if not report["workspace_limited"] and cfg["uid"] is not None:
        try:
            _hand_over(cfg["workdir"], int(cfg["uid"]), int(cfg["gid"]))
        except OSError as exc:
            status.fail("workspace", f"cannot hand over {cfg['workdir']}: {exc}", terminal=False)
    # SIGTERM from the parent is for the code (a grace period to exit), not for us.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    child = os.fork()
    if child == 0:
        workspace.close()  # init holds no host directory the code could borrow
        _init(libc, cfg, status, report["processes"])
    status.send(event="init", pid=child)
    while True:
        try:
            os.waitpid(child, 0)
            break
        except ChildProcessError:
            break
    if cfg["sync_back"]:
        _sync_back(workspace, status)
    os.close(status_fd)
    os._exit(0)


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == LAUNCH_FLAG:
    _launcher_main(sys.argv[2:])
