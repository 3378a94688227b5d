"""The SQLite the SQLite store runs on, chosen in this one place: every module of memsearch that
opens SQLite (the store, its access file, the in-memory FTS5 tables that tokenize as the store's
index does) imports `sqlite3` from here.

sqlean.py where it is installed (a dependency on the platforms it has wheels for): Python's
`sqlite3` module built with SQLite 3.50, a drop-in with the same API. It brings FTS5's
`secure-delete` (SQLite 3.42): a delete removes a memory's words from the full-text index in
place (a delete took 16 ms at 100k memories, most of it the WAL checkpoint's fsync) where an
older SQLite has to merge the whole index (0.6-1.3 s) for them to leave the file. Elsewhere,
or with MEMSEARCH_SQLITE=sqlite3, Python's own `sqlite3`: the store works the same on it,
deletes by the merge when its SQLite is older than 3.42 (SECURE_DELETE), and rebuilds a
full-text table that a newer SQLite wrote (see `migrations.fts_format`). README, "Deleting",
says why sqlean.py.

sqlean.py's bundled extensions (fileio, define's eval, crypto, …) are off unless its own
variables (SQLEAN_ENABLE…) turn them on, and loading extensions is off as in Python's module; the
extension functions that reach files or run SQL are direct-only, so a store file's triggers and
views cannot call them even then (tests/test_sqlite_driver.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# The variable that picks the driver: `sqlite3` (Python's own: a platform's own SQLite, and for
# comparing) or `sqlean` (the default where sqlean.py is installed). Another value, or `sqlean`
# where it is not installed, is said in one line when a store opens (PROBLEM: SQLiteStore.open
# raises it as a StoreUnavailableError), the default serving the rest meanwhile.
DRIVER_VARIABLE = "MEMSEARCH_SQLITE"
CHOICES = ("sqlean", "sqlite3")
_ASKED = os.environ.get(DRIVER_VARIABLE, "").strip().lower()

# Type-checked against the standard module's stubs (the same API).
if TYPE_CHECKING or _ASKED == "sqlite3":
    import sqlite3
else:
    try:
        import sqlean as sqlite3
    except ImportError:  # a platform without sqlean.py's wheels
        import sqlite3

# The module's name: "sqlean" or "sqlite3".
DRIVER = sqlite3.__name__.split(".")[0]
# FTS5's secure-delete option came in SQLite 3.42.0; a table that has it is read only by 3.42 on.
SECURE_DELETE = sqlite3.sqlite_version_info >= (3, 42, 0)


def driver_problem(asked: str, driver: str) -> str | None:
    """What is wrong with MEMSEARCH_SQLITE=`asked` when the driver is `driver`, in one line; None
    when nothing is."""
    if asked and asked not in CHOICES:
        return (
            f"{DRIVER_VARIABLE}={asked} is not a driver memsearch knows: set it to sqlean (sqlean.py) or "
            "sqlite3 (Python's own), or unset it (sqlean.py where it is installed)"
        )
    if asked == "sqlean" and driver != "sqlean":
        return f"{DRIVER_VARIABLE}=sqlean: sqlean.py is not installed (pip install sqlean.py), or unset it"
    return None


PROBLEM = driver_problem(_ASKED, DRIVER)

__all__ = ["CHOICES", "DRIVER", "DRIVER_VARIABLE", "PROBLEM", "SECURE_DELETE", "driver_problem", "sqlite3"]
