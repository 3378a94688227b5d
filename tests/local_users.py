"""Another user of the machine, for the tests that check what holds against one: a forked child of
the test process that switches to uid/gid 65534 (nobody) and runs one function. Tests run as root
in CI; where the switch cannot be made (not root, no CAP_SETUID), `other_user` skips with why."""

from __future__ import annotations

import os
import pickle
import select
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

OTHER_UID = 65534
T = TypeVar("T")


class OtherUser:
    uid = OTHER_UID

    def run(self, function: Callable[..., T], *args: Any, timeout: float = 60) -> T:
        """`function(*args)` in a child process of uid and gid 65534 with no other groups; its
        result (or the repr of what it raised, as OtherUserError)."""
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: switch, run, report, and leave without running the parent's clean-up
            try:
                os.close(read)
                os.setgroups([])
                os.setgid(self.uid)
                os.setuid(self.uid)
                outcome: tuple[bool, Any] = (True, function(*args))
            except BaseException as error:  # everything goes back to the test
                outcome = (False, f"{type(error).__name__}: {error}")
            try:
                with os.fdopen(write, "wb") as channel:
                    pickle.dump(outcome, channel)
            finally:
                os._exit(0)
        os.close(write)
        received = b""
        deadline = time.monotonic() + timeout
        with os.fdopen(read, "rb") as channel:
            while True:
                ready, _, _ = select.select([channel], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    raise TimeoutError(f"the other user's {function.__name__} took over {timeout} s")
                chunk = channel.read1(65536)
                if not chunk:
                    break
                received += chunk
        os.waitpid(pid, 0)
        succeeded, value = pickle.loads(received)
        if not succeeded:
            raise OtherUserError(value)
        return value  # type: ignore[no-any-return]


class OtherUserError(Exception):
    """What the other user's function raised."""


def _uid() -> int:
    return os.getuid()


@pytest.fixture(scope="session")
def other_user() -> OtherUser:
    if os.geteuid() != 0:
        pytest.skip("acting as a second user needs root (the tests run as root in CI)")
    user = OtherUser()
    try:
        switched = user.run(_uid, timeout=30)
    except (OSError, OtherUserError, TimeoutError) as error:
        pytest.skip(f"cannot switch to uid {OTHER_UID} in a child process: {error}")
    if switched != OTHER_UID:
        pytest.skip(f"the child's uid is {switched}, not {OTHER_UID}")
    return user


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder both users can write, sticky like /tmp (the test's own tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="ms-shared-", dir="/tmp"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
