"""Numbered schema migrations. The schema changes only by appending to MIGRATIONS.

`PRAGMA user_version` holds the number of migrations applied; each runs in the transaction
that also bumps the version, so a store is never left half-migrated.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memsearch.store.sqlite_driver import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # 1: memories, their full-text index, their vectors, and store-level facts.
    """
    CREATE TABLE memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT UNIQUE,
        text TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_accessed_at TEXT NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        importance REAL NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
        priority REAL NOT NULL DEFAULT 1.0 CHECK (priority BETWEEN 1 AND 2),
        pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        project TEXT,
        namespace TEXT,
        session TEXT,
        role TEXT,
        tags TEXT NOT NULL DEFAULT '[]',
        metadata TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX memories_created_at ON memories (created_at);
    CREATE INDEX memories_project ON memories (project);
    CREATE INDEX memories_namespace ON memories (namespace);
    CREATE INDEX memories_session ON memories (session);
    CREATE INDEX memories_content_hash ON memories (content_hash);
    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        text, tags, tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TABLE vectors (
        memory_id INTEGER PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
        vector BLOB NOT NULL
    );
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # 2: quality score, supersession and groups of related memories (memsearch consolidate).
    """
    ALTER TABLE memories ADD COLUMN memory_score REAL CHECK (memory_score BETWEEN 0 AND 1);
    ALTER TABLE memories ADD COLUMN superseded_by INTEGER REFERENCES memories (id) ON DELETE SET NULL;
    ALTER TABLE memories ADD COLUMN group_id INTEGER;
    CREATE INDEX memories_superseded_by ON memories (superseded_by);
    CREATE INDEX memories_group_id ON memories (group_id);
    """,
    # 3: conversations. Turns and session chunks are memories of their own kind. A turn is also
    # searchable through views: `context` (it with its neighbours) and `prev` (its predecessor
    # and it) are full-text columns; vector views (`context`, `next`, facets) live in `views`.
    # The full-text table is rebuilt with the new columns; a note's context is its own text.
    """
    ALTER TABLE memories ADD COLUMN kind TEXT NOT NULL DEFAULT 'note' CHECK (kind IN ('note', 'turn', 'session'));
    ALTER TABLE memories ADD COLUMN conversation TEXT;
    ALTER TABLE memories ADD COLUMN position INTEGER;
    ALTER TABLE memories ADD COLUMN parent_id INTEGER REFERENCES memories (id) ON DELETE SET NULL;
    CREATE INDEX memories_conversation ON memories (conversation, session, position);
    CREATE INDEX memories_parent ON memories (parent_id);
    CREATE INDEX memories_kind ON memories (kind);
    CREATE TABLE views (
        memory_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        view TEXT NOT NULL,
        text TEXT NOT NULL,
        vector BLOB,
        PRIMARY KEY (memory_id, view)
    );
    CREATE INDEX views_view ON views (view, memory_id);
    CREATE VIRTUAL TABLE memories_fts_new USING fts5 (
        text, tags, context, prev, tokenize = 'porter unicode61 remove_diacritics 2'
    );
    INSERT INTO memories_fts_new (rowid, text, tags, context, prev)
        SELECT id, text, (SELECT coalesce(group_concat(value, ' '), '') FROM json_each(memories.tags)), text, ''
        FROM memories;
    DROP TABLE memories_fts;
    ALTER TABLE memories_fts_new RENAME TO memories_fts;
    """,
    # 4: every memory has the views every kind has (OWN_TEXT_VIEWS): a memory that has no
    # previous-turn text of its own (a note) is searched there by its text (models.default_view_text).
    """
    UPDATE memories_fts SET prev = text
        WHERE prev = '' AND rowid IN (SELECT id FROM memories WHERE kind != 'session');
    CREATE INDEX memories_role ON memories (role);
    """,
    # 5: gram columns beside the text (with tags) and each lexical view: their CJK bigrams and
    # symbols (see fts.GRAM_COLUMNS; fts.gram_text is the SQL function memsearch_grams while
    # migrating), so "密钥" finds "部署密钥…" and "🚀" the note that has it. Empty for plain English.
    """
    CREATE VIRTUAL TABLE memories_fts_new USING fts5 (
        text, tags, context, prev, grams, context_grams, prev_grams,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    INSERT INTO memories_fts_new (rowid, text, tags, context, prev, grams, context_grams, prev_grams)
        SELECT rowid, text, tags, context, prev, memsearch_grams(text, tags), memsearch_grams(context, ''),
            memsearch_grams(prev, '')
        FROM memories_fts;
    DROP TABLE memories_fts;
    ALTER TABLE memories_fts_new RENAME TO memories_fts;
    """,
    # 6: deleted text leaves the file. Stores now delete with `PRAGMA secure_delete` on (freed space
    # is zeroed) and merge the full-text index after each delete (SQLiteStore._forget_deleted_text);
    # a store written before keeps deleted words in older index segments until this merge.
    """
    INSERT INTO memories_fts (memories_fts) VALUES ('optimize');
    """,
    # 7: the vectors of the store's other models (Memsearch.add_model), of each memory's own text,
    # by model name (the models are recorded in meta: store.model_vectors.EXTRA_MODELS_KEY). IF NOT
    # EXISTS: a migration replayed (as the tests that rewind user_version do) changes nothing.
    """
    CREATE TABLE IF NOT EXISTS model_vectors (
        model TEXT NOT NULL,
        memory_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        vector BLOB NOT NULL,
        PRIMARY KEY (model, memory_id)
    );
    CREATE INDEX IF NOT EXISTS model_vectors_memory ON model_vectors (memory_id);
    """,
    # 8: the memories that wait for their vectors (stored first, embedded after: `memsearch index`
    # makes a note searchable by its words as soon as its file is read). A memory stored before
    # without its own vector waits too, so the next `index` embeds it.
    """
    CREATE TABLE IF NOT EXISTS pending_vectors (
        memory_id INTEGER PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE
    );
    INSERT OR IGNORE INTO pending_vectors (memory_id)
        SELECT id FROM memories m WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.memory_id = m.id);
    """,
    # 9: the memories whose full-text row was written or deleted, with the generation the write
    # began at (store.lexical_changes): a large store's impact index file of an older generation
    # stays usable for the rows not named here. `lexical_changes_from` in meta: the log holds every
    # change from that generation on (a file of an older generation cannot be brought up to date).
    """
    CREATE TABLE IF NOT EXISTS lexical_changes (
        memory_id INTEGER PRIMARY KEY,
        generation INTEGER NOT NULL
    );
    INSERT OR REPLACE INTO meta (key, value)
        SELECT 'lexical_changes_from', coalesce((SELECT value FROM meta WHERE key = 'generation'), '0');
    """,
    # 10: the full-text table may now be in FTS5's file format 5 (its secure-delete option, which an
    # SQLite 3.42 or newer sets on open: `fts_format` below). Nothing changes in the file; the version
    # is for a memsearch from before, which would take such a table for a damaged one and now says
    # "upgrade memsearch" instead.
    """
    SELECT 1;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


def split_statements(script: str) -> builtins.list[str]:
    """Split a migration into statements; migrations contain no semicolons inside literals."""
    return [part.strip() for part in script.split(";") if part.strip()]


# -- the full-text table's format: it follows the SQLite that writes the store ---------------------
#
# FTS5's secure-delete option (SQLite 3.42) removes a deleted row's words from the index in place,
# so a delete need not merge the whole index for them to leave the file (SQLiteStore's
# _forget_deleted_text). It is kept in the table (`memories_fts_config`), and the table's next write
# moves it to FTS5's file format 5, which SQLite before 3.42 refuses for every use of the table,
# 'rebuild' included ("invalid fts5 file format (found 5, expected 4) - run 'rebuild'"); the other
# tables stay readable. Not a numbered migration: the schema version only goes up, and the format
# follows the SQLite of whoever opens the store to write. On each such open, `fts_format` says
# what suits this SQLite: a new one turns secure-delete on; an older one, if the table is at format
# 5, puts it back to format 4 and rebuilds the index from the text the table keeps (its content
# table, an ordinary table any SQLite reads): nothing stored is lost. An older SQLite reads and
# writes a format-4 table that has the option set (it ignores it; its deletes merge the index), so
# the option stays: the next newer SQLite deletes in place again without a write of its own.
FTS_FORMAT = "SELECT k, v FROM memories_fts_config WHERE k IN ('version', 'secure-delete')"
SECURE_DELETE_ON = "INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 1)"
SECURE_DELETE_OFF = "INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 0)"
# The back step ends with a settings write of FTS5's own (its automerge, to the value it has):
# that one moves the table's settings cookie, so a newer SQLite's connection that has the table
# open reloads its settings (format 4 now) and its next delete writes format 5 again; the direct
# UPDATE alone left it writing format-5 pages under a setting that said 4, a damaged index.
BACK_TO_FORMAT_4 = (
    "UPDATE memories_fts_config SET v = 4 WHERE k = 'version'",
    "INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')",
    "INSERT INTO memories_fts (memories_fts, rank) "
    "VALUES ('automerge', coalesce((SELECT v FROM memories_fts_config WHERE k = 'automerge'), 4))",
)


def fts_config(db: sqlite3.Connection) -> dict[str, object]:
    """The full-text table's FTS_FORMAT rows, read in `db`."""
    return dict(db.execute(FTS_FORMAT).fetchall())


def secure_delete_on(config: Mapping[str, object]) -> bool:
    """Whether the full-text table (its FTS_FORMAT rows) deletes with FTS5's secure-delete."""
    return str(config.get("secure-delete", 0)) == "1"


def fts_format(config: Mapping[str, object], secure_delete: bool) -> tuple[str, ...]:
    """The statements that suit the full-text table (its FTS_FORMAT rows) to an SQLite that has
    FTS5's secure-delete (`secure_delete`) or not; none when it suits it already."""
    readable = 5 if secure_delete else 4  # the newest FTS5 file format this SQLite reads
    try:
        version: int | None = int(str(config.get("version", 4)))
    except ValueError:
        version = None
    if version is None or not 4 <= version <= readable:  # a newer SQLite's format, or a damaged record
        return BACK_TO_FORMAT_4
    if secure_delete and not secure_delete_on(config):
        return (SECURE_DELETE_ON,)
    return ()
