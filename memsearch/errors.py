"""Typed errors of the core. The CLI turns them into one-line messages and exit codes."""

from __future__ import annotations

from enum import IntEnum


def short_repr(value: object, limit: int = 40) -> str | None:
    """`repr(value)` when it fits in an error message's one line (at most `limit` characters, no
    line break), else None; also None when the repr itself fails (a caller's object, an int too
    long to print)."""
    try:
        text = repr(value)
    except Exception:
        return None
    return text if len(text) <= limit and "\n" not in text else None


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    INTERRUPTED = 130


class MemsearchError(Exception):
    """Base of every error memsearch raises on purpose; its message is one line for the user.

    `field` names the API parameter at fault, if one is: each front end words it its own way (the
    CLI as its option, say), with `problem` as the rest of the sentence. The message itself names
    no front end's options or commands; front ends add their own hints by the error's type.
    """

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, problem: str, *, field: str | None = None) -> None:
        super().__init__(f"{field} {problem}" if field else problem)
        self.problem = problem
        self.field = field


class InvalidInputError(MemsearchError):
    """A value given on the command line or to the API is out of range or malformed."""

    exit_code = ExitCode.USAGE


class NumberTooLongError(InvalidInputError):
    """JSON input holds a whole number of more digits than memsearch reads (`jsonl.decode_json`):
    `path` leads to it (object keys and array indexes from the top), `field` spells that path."""

    def __init__(self, path: tuple[str | int, ...], digits: int, limit: int) -> None:
        problem = f"is a number of {digits:,} digits; the limit is {limit:,}"
        spelled = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path).removeprefix(".")
        super().__init__(problem if spelled else f"the JSON value {problem}", field=spelled or None)
        self.path, self.digits, self.limit = path, digits, limit

    def within(self, depth: int) -> NumberTooLongError:
        """The same error with its path taken from `depth` levels down (the arguments of a message)."""
        return NumberTooLongError(self.path[depth:], self.digits, self.limit)


class ImportLineError(MemsearchError):
    """A line of an import or queries file is malformed; nothing of the file was used."""

    def __init__(self, source: str, line_number: int, problem: str, *, unit: str = "line") -> None:
        # unit: "item" numbers the memories of a JSON document (or of lines holding several)
        super().__init__(f"{source}, {unit} {line_number}: {problem}; nothing from this file was stored")
        self.line_number = line_number


class StoreNotFoundError(MemsearchError):
    pass


class StoreCorruptError(MemsearchError):
    pass


class StoreUnavailableError(MemsearchError):
    """The store's file system refused: the disk is full, the path cannot hold a file, an I/O
    error. Nothing of the failed command was stored."""


class MemoryNotFoundError(MemsearchError):
    pass


class EditConflictError(MemsearchError):
    """A memory's text changed between the moment an edit of it started and the moment it was to be
    written (another command wrote it meanwhile): nothing was written. `kept_in` is where a front
    end kept the edit that was not written, when it did."""

    def __init__(self, memory_id: int, kept_in: str | None = None) -> None:
        problem = f"memory {memory_id} changed while it was being edited; nothing was written"
        super().__init__(problem + (f"; your edit is kept in {kept_in}" if kept_in else ""))
        self.memory_id, self.kept_in = memory_id, kept_in


class DuplicateKeyError(MemsearchError):
    pass


class NoteSectionError(MemsearchError):
    """A change the store alone cannot make to a section of an indexed note file (its text, its
    tags, or deleting it): the file is the section's truth, so it is changed there and indexed
    again. Nothing was changed. `path` and `line` say where the section starts."""

    def __init__(self, memory_id: int, path: str, line: int, change: str) -> None:
        super().__init__(f"memory {memory_id} is the section of {path}:{line}; {change} it in the file, then index it")
        self.memory_id, self.path, self.line, self.change = memory_id, path, line, change


class NotARootError(InvalidInputError):
    """A folder named as a remembered root of the notes index is not one."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is not a remembered folder of notes")
        self.path = path


class ModelMismatchError(MemsearchError):
    pass


class EmbeddingError(MemsearchError):
    pass


class ConfigError(MemsearchError):
    """The config file or a MEMSEARCH_* variable holds something memsearch cannot use."""


class MixedDeleteTargetsError(InvalidInputError):
    """A delete names memories and also filters (or everything): it must be one or the other."""

    def __init__(self) -> None:
        super().__init__("and filters (or everything) cannot be given together", field="refs")


class NoDeleteTargetError(InvalidInputError):
    """A delete names no memory and no filter, and does not say everything: nothing to delete."""

    def __init__(self) -> None:
        super().__init__("are missing: give refs, filters, or everything to delete every memory", field="refs")


class TextTooLongError(InvalidInputError):
    """A memory's text is over models.MAX_TEXT_CHARS; nothing was stored."""


class ModelVectorsMissingError(MemsearchError):
    """A profile's leg searches the vectors of a model the store does not hold (see
    `Memsearch.add_model`); nothing was searched."""

    def __init__(self, profile: str, model: str) -> None:
        super().__init__(f"profile {profile} needs {model}'s vectors in this store")
        self.profile = profile
        self.model = model


class ServerUnavailableError(MemsearchError):
    """A running server named to a client (`memsearch.Client`) does not accept connections: nothing
    was sent to it."""


class UnauthorizedError(MemsearchError):
    """A server wants a bearer token the client did not send, or another one (HTTP 401)."""


class ServerError(MemsearchError):
    """A server answered outside its API: an internal error, a reply that is not its JSON, a
    connection cut or timed out after the request was sent (it may have been carried out)."""
