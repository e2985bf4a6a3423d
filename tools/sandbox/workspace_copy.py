"""Copying a workspace into the sandbox's tmpfs and the result back (run by the launcher).

Why a copy: the size cap on what a call may write is a size-limited tmpfs
mounted over the workspace inside the sandbox's own mount namespace, so the
host filesystem (and its blocks reserved for root) is never written by the
code at all. The launcher copies the workspace in before the code starts and
mirrors the tmpfs back after every process of the call is dead, so nothing
can race the copy.

Both directions work on directory descriptors and never follow a symlink.
Entries the sandbox user could not read on the host (a root-owned 0600 file,
a 0700 directory, device nodes, sockets) are *hidden*: not copied in, and
left exactly as they were on the way back, even if the code created an entry
of the same name. Hard links come back as separate files, so writing through
a link can never change a file outside the workspace.

Standard library only: the launcher loads this file by path, without the
package.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

__all__ = ["MAX_DEPTH", "WorkspaceTooDeep", "WorkspaceTooLarge", "copy_in", "copy_out"]

MAX_DEPTH = 256
"""Deepest directory nesting copied either way (each level holds two descriptors)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class WorkspaceTooLarge(OSError):
    """The workspace does not fit into the tmpfs (``ENOSPC`` or out of inodes)."""


class WorkspaceTooDeep(OSError):
    """Directories nested deeper than :data:`MAX_DEPTH`: refused before anything is changed."""


def _readable(st: os.stat_result, uid: int | None, gid: int | None) -> bool:
    """Whether ``uid``/``gid`` (no capabilities) may read it (and enter it, for a directory)."""
    if uid is None:
        return True  # the launcher runs as that user: what it can open, the code could
    want_dir = stat.S_ISDIR(st.st_mode)
    if st.st_uid == uid:
        r, x = stat.S_IRUSR, stat.S_IXUSR
    elif st.st_gid == gid:
        r, x = stat.S_IRGRP, stat.S_IXGRP
    else:
        r, x = stat.S_IROTH, stat.S_IXOTH
    mode = st.st_mode
    return bool(mode & r) and (not want_dir or bool(mode & x))


def _copy_file(src_dir: int, dst_dir: int, name: str, st: os.stat_result) -> None:
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_dir)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            return  # swapped for something else since the listing: leave it
        dst = os.open(
            name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dst_dir,
        )
        try:
            _copy_data(src, dst)
            os.fchmod(dst, stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_data(src: int, dst: int) -> None:
    """Copy the data of ``src`` and only its data: holes stay holes.

    A sparse file costs the tmpfs nothing, so without this a call could make
    thousands of 16 MiB files of holes and have them written out in full on
    the host; copying extents keeps the host's usage at the tmpfs's.
    """
    size = os.fstat(src).st_size
    pos = 0
    while pos < size:
        try:
            start = os.lseek(src, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break  # only a hole is left
            raise
        end = os.lseek(src, start, os.SEEK_HOLE)
        while start < end:
            data = os.pread(src, min(_CHUNK, end - start), start)
            if not data:
                break
            view = memoryview(data)
            offset = start
            while view:
                written = os.pwrite(dst, view, offset)
                view, offset = view[written:], offset + written
            start += len(data)
        pos = end
    os.ftruncate(dst, size)


def _chown(dst_dir: int, name: str, owner: tuple[int, int] | None) -> None:
    if owner is not None:
        os.chown(name, *owner, dir_fd=dst_dir, follow_symlinks=False)


def copy_in(
    src_dir: int,
    dst_dir: int,
    *,
    uid: int | None,
    gid: int | None,
    owner: tuple[int, int] | None,
) -> set[str]:
    """Copy the host workspace ``src_dir`` into the tmpfs ``dst_dir``; returns the hidden paths.

    ``uid``/``gid`` decide what the code may see (None: whatever the launcher
    itself can open); ``owner`` is who owns the copies (the sandbox user, so
    the code can change them). Raises :class:`WorkspaceTooLarge` when the
    tmpfs fills up.
    """
    hidden: set[str] = set()
    try:
        _copy_in(src_dir, dst_dir, "", uid, gid, owner, hidden, 0)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise WorkspaceTooLarge(exc.errno, "the workspace is larger than its size cap") from exc
        raise
    return hidden


def _copy_in(
    src_dir: int,
    dst_dir: int,
    rel: str,
    uid: int | None,
    gid: int | None,
    owner: tuple[int, int] | None,
    hidden: set[str],
    depth: int,
) -> None:
    if depth > MAX_DEPTH:
        raise WorkspaceTooDeep(errno.ELOOP, f"directories nested deeper than {MAX_DEPTH}")
    with os.scandir(src_dir) as entries:
        listing = [(e.name, e.stat(follow_symlinks=False)) for e in entries]
    for name, st in listing:
        path = rel + name
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            os.symlink(os.readlink(name, dir_fd=src_dir), name, dir_fd=dst_dir)
            _chown(dst_dir, name, owner)
            continue
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)) or not _readable(st, uid, gid):
            hidden.add(path)
            continue
        if stat.S_ISREG(mode):
            try:
                _copy_file(src_dir, dst_dir, name, st)
            except PermissionError:
                hidden.add(path)
                continue
            _chown(dst_dir, name, owner)
            continue
        try:
            sub_src = os.open(name, _DIR_FLAGS, dir_fd=src_dir)
        except PermissionError:
            hidden.add(path)
            continue
        try:
            os.mkdir(name, 0o700, dir_fd=dst_dir)
            sub_dst = os.open(name, _DIR_FLAGS, dir_fd=dst_dir)
            try:
                _copy_in(sub_src, sub_dst, path + "/", uid, gid, owner, hidden, depth + 1)
                os.fchmod(sub_dst, stat.S_IMODE(mode) & 0o777 | stat.S_IRWXU)
                if owner is not None:
                    os.fchown(sub_dst, *owner)
                os.utime(sub_dst, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(sub_dst)
        finally:
            os.close(sub_src)


def copy_out(src_dir: int, dst_dir: int, hidden: set[str]) -> None:
    """Mirror the tmpfs ``src_dir`` onto the host workspace ``dst_dir``, sparing ``hidden``.

    Unchanged files (same size and modification time as copied in) are not
    rewritten; changed ones are replaced (unlink, then a new file), never
    written in place. A tree nested deeper than :data:`MAX_DEPTH` raises
    :class:`WorkspaceTooDeep` before the host is touched, so it is never left
    half copied for that reason.
    """
    _check_depth(src_dir, 0)
    _copy_out(src_dir, dst_dir, "", hidden)


def _check_depth(dir_fd: int, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise WorkspaceTooDeep(errno.ELOOP, f"directories nested deeper than {MAX_DEPTH}")
    for name, st in _listing(dir_fd).items():
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                _check_depth(sub, depth + 1)
            finally:
                os.close(sub)


def _listing(dir_fd: int) -> dict[str, os.stat_result]:
    with os.scandir(dir_fd) as entries:
        return {e.name: e.stat(follow_symlinks=False) for e in entries}


def _spared(path: str, hidden: set[str]) -> bool:
    """``path`` is hidden, or holds something hidden (so it must not be removed whole)."""
    return path in hidden or any(h.startswith(path + "/") for h in hidden)


def _remove(dir_fd: int, name: str, path: str, hidden: set[str]) -> None:
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        for child in _listing(sub):
            child_path = f"{path}/{child}"
            if child_path not in hidden:
                _remove(sub, child, child_path, hidden)
    finally:
        os.close(sub)
    with contextlib.suppress(OSError):  # not empty: it holds a hidden entry
        os.rmdir(name, dir_fd=dir_fd)


def _copy_out(src_dir: int, dst_dir: int, rel: str, hidden: set[str]) -> None:
    src, dst = _listing(src_dir), _listing(dst_dir)
    for name in dst:
        path = rel + name
        if name not in src and path not in hidden:
            _remove(dst_dir, name, path, hidden)
    for name, st in src.items():
        path = rel + name
        if path in hidden:
            continue  # never replace what the code could not see
        old = dst.get(name) if name in src else None
        mode = st.st_mode
        if old is not None and stat.S_IFMT(old.st_mode) != stat.S_IFMT(mode):
            if _spared(path, hidden):
                continue
            _remove(dst_dir, name, path, hidden)
            old = None
        if stat.S_ISDIR(mode):
            if old is None:
                os.mkdir(name, 0o700, dir_fd=dst_dir)
            sub_src = os.open(name, _DIR_FLAGS, dir_fd=src_dir)
            try:
                sub_dst = os.open(name, _DIR_FLAGS, dir_fd=dst_dir)
                try:
                    _copy_out(sub_src, sub_dst, path + "/", hidden)
                    os.fchmod(sub_dst, stat.S_IMODE(mode) & 0o777)
                finally:
                    os.close(sub_dst)
            finally:
                os.close(sub_src)
        elif stat.S_ISREG(mode):
            if (
                old is not None
                and old.st_size == st.st_size
                and old.st_mtime_ns == st.st_mtime_ns
                and old.st_nlink == 1
            ):
                if stat.S_IMODE(old.st_mode) != stat.S_IMODE(mode) & 0o777:
                    os.chmod(name, stat.S_IMODE(mode) & 0o777, dir_fd=dst_dir)
                continue
            if old is not None:
                os.unlink(name, dir_fd=dst_dir)
            _copy_file(src_dir, dst_dir, name, st)
        elif stat.S_ISLNK(mode):
            target = os.readlink(name, dir_fd=src_dir)
            if old is not None:
                if os.readlink(name, dir_fd=dst_dir) == target:
                    continue
                os.unlink(name, dir_fd=dst_dir)
            os.symlink(target, name, dir_fd=dst_dir)
        # fifos, sockets and device nodes made by the code stay in the sandbox
