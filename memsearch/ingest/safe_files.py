"""How `memsearch index` touches the file system: it opens only what its walk saw, and trusts no
folder or file that another user could have written.

- No symbolic link is followed by an open: a path (absolute, its links resolved by the walk) is
  opened one folder at a time from `/`, each with O_NOFOLLOW, so a folder or file swapped for a
  link after the walk fails to open (ELOOP) instead of leading out of the root.
- A file is opened O_NONBLOCK | O_NOCTTY (a FIFO cannot hang the run, a terminal cannot become
  ours) and read only when `fstat` says a regular file on the device and inode the walk saw; at
  most `limit` bytes are read, so a file that grew (or `/dev/zero`) cannot fill the memory.
- A folder or file belonging to someone other than you or root, or that others may write (the
  world, or a group with a member other than its owner), is `untrusted`: what it holds could be
  another user's text filed as yours.
- A name that is not valid UTF-8 cannot be stored (SQLite, PostgreSQL and JSON hold Unicode text);
  `printable` shows it with its bad bytes as `\\xNN`.

Refusals are `RefusedFileError`, an OSError whose message is the reason.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from pathlib import PurePosixPath

Identity = tuple[int, int]  # (st_dev, st_ino): which file a path named when it was walked

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_FOLDER_SWAPPED = "a folder on its path became a symlink or a file; not followed"
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symlink",
}


class RefusedFileError(OSError):
    """A file that is not opened or read; the message (its strerror) says why."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


def identity(info: os.stat_result) -> Identity:
    return info.st_dev, info.st_ino


def kind(info: os.stat_result) -> str:
    """What a file that is not a regular one is: "a FIFO", "a character device"…"""
    return _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")


def open_folder(path: str) -> int:
    """A descriptor of the folder `path`, no symbolic link followed on the way (module doc)."""
    return _open_beneath(path, _FOLDER_FLAGS, "became a symlink or a file after the walk; not followed")


def lstat_beneath(path: str) -> os.stat_result:
    """`os.lstat(path)`, no symbolic link followed on the way to it either."""
    parent = open_folder(str(PurePosixPath(path).parent))
    try:
        return os.stat(PurePosixPath(path).name, dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)


def read_walked(path: str, walked: Identity, limit: int) -> bytes:
    """The bytes of the regular file the walk saw at `path` (module doc); `RefusedFileError` if the
    path now leads elsewhere, to something else than a regular file, or to more than `limit` bytes."""
    descriptor = _open_beneath(path, _FILE_FLAGS, "became a symlink after the walk; not followed")
    return _read_regular(descriptor, walked, limit)


def read_in_folder(folder: int, name: str, limit: int) -> bytes:
    """The bytes of the regular file `name` in the open folder `folder`, at most `limit` of them;
    a symbolic link is not followed (git reads no .gitignore through one either)."""
    return _read_regular(_open_at(folder, name, _FILE_FLAGS, "is a symlink, not followed"), None, limit)


def _open_beneath(path: str, flags: int, swapped: str) -> int:
    """`path` opened one folder at a time from `/`; `RefusedFileError(swapped)` if its last part is
    a link (or not a folder, for a folder's flags), and another if a folder on the way is."""
    parts = PurePosixPath(path).parts
    if not parts or parts[0] != "/":
        raise RefusedFileError(errno.EINVAL, "is not an absolute path")
    folder = os.open("/", _FOLDER_FLAGS)
    try:
        for part in parts[1:-1]:
            inner = _open_at(
                folder, part, _FOLDER_FLAGS, "a folder on its path became a symlink or a file; not followed"
            )
            os.close(folder)
            folder = inner
        return _open_at(folder, parts[-1] if len(parts) > 1 else ".", flags, swapped)
    finally:
        os.close(folder)


def _open_at(folder: int, name: str, flags: int, swapped: str) -> int:
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as error:  # O_NOFOLLOW met a link (ELOOP, or ENOTDIR with O_DIRECTORY)
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise RefusedFileError(error.errno, swapped) from None
        raise


def _read_regular(descriptor: int, walked: Identity | None, limit: int) -> bytes:
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise RefusedFileError(errno.EINVAL, f"is {kind(info)}, not a regular file; not read")
        if walked is not None and identity(info) != walked:
            raise RefusedFileError(errno.ESTALE, "was replaced by another file after the walk; not read")
        chunks, wanted = [], limit + 1  # one byte more than the limit says whether it is over
        while wanted > 0 and (chunk := os.read(descriptor, min(wanted, 1 << 20))):
            chunks.append(chunk)
            wanted -= len(chunk)
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > limit:
        raise RefusedFileError(errno.EFBIG, f"is over the {limit:,} bytes it may have; not read")
    return data


def untrusted(info: os.stat_result) -> str | None:
    """Why another user could have put this folder or file there or changed it (mode bits and
    owner; ACLs are not read); None when only you and root could."""
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (os.geteuid(), 0):
        return f"belongs to another user (uid {info.st_uid})"
    if mode & stat.S_IWOTH:
        return f"other users may write it (mode {mode:o})"
    if mode & stat.S_IWGRP and not _private_group(info.st_gid, info.st_uid):
        return f"its group (gid {info.st_gid}) may write it (mode {mode:o})"
    return None


@functools.cache
def _private_group(gid: int, uid: int) -> bool:
    """Whether `gid` is the user-private group of `uid` (their primary group, of their name, with no
    other member), which Debian and Ubuntu make for each user with a umask of 002: a folder only
    its owner's group may write is its owner's alone (the rule of Debian's OpenSSH)."""
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except KeyError:
        return False
    return user.pw_gid == gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def storable(path: str) -> bool:
    """Whether the path is valid Unicode (a name that is not UTF-8 comes as lone surrogates)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(path: str) -> str:
    """The path as valid Unicode: the bytes of a name that is not UTF-8 as `\\xNN` (`caf\\xe9.md`)."""
    if storable(path):
        return path
    try:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that no file name's byte became
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def quoted(path: str) -> str:
    """The path for a one-line message: as it is (`printable`), or as a Python string literal when it
    holds a line break or another character that is not printable."""
    shown = printable(path)
    return shown if shown.isprintable() else repr(shown)
