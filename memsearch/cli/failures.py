"""The CLI's error policy: every failure is one line on stderr (`memsearch: …`) and a documented
exit code (memsearch.errors.ExitCode); the library's errors are worded with the CLI's options
(OPTION_OF_FIELD, made with the options from the operations' fields) and hints (HINT_OF_ERROR); a
reader that went away (`| head`) is a success; Ctrl-C is 130; a bug says so and offers --debug's
traceback."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer

from memsearch.cli.consoles import messages
from memsearch.cli.literal import visible
from memsearch.cli.options import OPTION_OF_FIELD
from memsearch.errors import ExitCode, MemsearchError, ModelVectorsMissingError, NoteSectionError

# Set by the root's --debug: failures print their traceback too.
debugging = {"on": False}


def fail(message: str, code: int) -> NoReturn:
    # A message may quote input that is not valid Unicode; it is shown escaped, never re-raised.
    shown = visible(message.encode("utf-8", "backslashreplace").decode("utf-8"))
    messages().print(f"memsearch: {shown}", markup=False, soft_wrap=True)
    sys.exit(code)


@contextmanager
def ends_cleanly() -> Iterator[None]:
    """A reader that went away (`| head`) ends the command as a success, silently; Ctrl-C ends it
    with one line and 130. Both are caught here, before Typer turns them into exit 1 and a
    silent 130."""
    try:
        yield
    except BrokenPipeError:
        try:  # what is still buffered for stdout goes nowhere, and flushing it cannot fail again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # no file descriptor (a test runner's stream)
            pass
        sys.exit(ExitCode.OK)
    except SystemExit as stop:  # Typer's help console is Rich's: it points stdout at /dev/null and exits 1
        if stop.code == 1 and _stdout_is_devnull():
            sys.exit(ExitCode.OK)
        raise
    except KeyboardInterrupt:
        fail("interrupted", ExitCode.INTERRUPTED)


def _stdout_is_devnull() -> bool:
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (OSError, ValueError):  # no file descriptor (a test runner's stream)
        return False


def _print_traceback() -> None:
    import traceback

    traceback.print_exc()


# What to do about an error of the environment, by errno.
_ADVICE_OF_ERRNO = {
    errno.EACCES: "permission denied; check its permissions or choose another path",
    errno.EPERM: "operation not permitted; check its permissions or choose another path",
    errno.EROFS: "the file system is read-only; choose a path you can write to",
    errno.ENOSPC: "the disk is full; free some space and run it again",
    errno.EISDIR: "it is a directory; give a file",
    errno.ENOTDIR: "a part of the path is not a directory; check the path",
    errno.ENOENT: "no such file or directory; check the path",
    errno.ENAMETOOLONG: "the name is too long; choose a shorter path",
}


def environment_message(error: OSError) -> str:
    """One line: what the system refused, where, and what to do."""
    advice = _ADVICE_OF_ERRNO.get(error.errno or 0, f"{error.strerror or error}; check the path and the disk")
    return f"{error.filename}: {advice}" if error.filename else advice


def invalid_argument(args: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps its bytes as lone surrogates)."""
    for number, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return f"argument {number} ({shown!r}) is not valid UTF-8; pass text in UTF-8"
    return None


# The CLI's words for the library's errors (its options for the fields: memsearch.cli.options).
HINT_OF_ERROR = {
    "StoreNotFoundError": "add a memory first or pass --db",
    "NothingToIndexError": "give one, as in `memsearch index ~/notes`",
    "DuplicateKeyError": "pass --replace to overwrite it",
    "ModelMismatchError": (
        "run `memsearch reindex` to re-embed the store with it, or pass the store's model with --model"
    ),
}


# Errors the CLI words in its own terms (ids, keys and options rather than the API's fields).
MESSAGE_OF_ERROR = {
    "MixedDeleteTargetsError": "give ids or keys, or filters (or --all), not both",
    "NoDeleteTargetError": "nothing to delete: give ids or keys, filters such as --tag, or --all for every memory",
}


def cli_message(error: MemsearchError) -> str:
    """The library's message with the CLI's option for the field at fault and its hint."""
    if (own := MESSAGE_OF_ERROR.get(type(error).__name__)) is not None:
        return own
    if isinstance(error, ModelVectorsMissingError):
        return f"{error}: run `memsearch reindex --add-model {error.model}`"
    if isinstance(error, NoteSectionError):
        from memsearch.cli.render import shown_path

        where = f"memory {error.memory_id} is the section of {shown_path(error.path)}:{error.line}"
        if error.change == "delete":
            return f"{where}; delete it from the file, or forget its folder (`memsearch index --forget PATH`)"
        return f"{where}; the file is its truth: `memsearch edit {error.memory_id}` opens it there and indexes it"
    message = f"{OPTION_OF_FIELD[error.field]} {error.problem}" if error.field in OPTION_OF_FIELD else str(error)
    hint = HINT_OF_ERROR.get(type(error).__name__)
    return f"{message}; {hint}" if hint else message


def run_reporting_failures(run: Callable[[], Any], args: list[str]) -> NoReturn:
    """Run the command line (`run`, Click's main without standalone mode) and exit with its code,
    every failure turned into one line and its exit code."""
    bad_argument = invalid_argument(args)
    if bad_argument:
        fail(bad_argument, ExitCode.USAGE)
    try:
        result = run()
    except typer.Abort:
        fail("interrupted", ExitCode.INTERRUPTED)
    except typer.TyperException as error:  # usage errors and other errors of the parser
        context = getattr(error, "ctx", None)
        where = f" (see `{context.command_path} --help`)" if context is not None else ""
        code = getattr(error, "exit_code", ExitCode.USAGE)
        fail(f"{error.format_message()}{where}", code)
    except MemsearchError as error:
        if debugging["on"]:
            _print_traceback()
        fail(cli_message(error), error.exit_code)
    except RecursionError:  # json's decoder on input nested thousands of levels deep
        fail("the input is nested too deeply to read (JSON nested over 1000 levels); nothing was stored", 1)
    except UnicodeDecodeError as error:  # a file or stdin that is not UTF-8
        fail(f"the input is not valid UTF-8 ({error.reason} at byte {error.start}); nothing was stored", 1)
    except OSError as error:  # the environment refused: say what, where and what to do
        fail(environment_message(error), ExitCode.ERROR)
    except Exception as error:  # a bug, or a store's own error met outside a write (a damaged file)
        from memsearch.store import describe_store_error

        if (known := describe_store_error(error)) is not None:
            fail(cli_message(known), known.exit_code)
        if debugging["on"]:
            _print_traceback()
        hint = "" if debugging["on"] else " (rerun with --debug for the traceback)"
        fail(f"internal error: {type(error).__name__}: {error}{hint}", ExitCode.ERROR)
    sys.exit(result if isinstance(result, int) else ExitCode.OK)
