"""What a bot's database holds, read the blunt way: every row of every table, every column.

Used to check that deleted text is gone from the whole database (the bot's tables, langgraph's
checkpoints, blobs and writes, the job queue's tables), not only from the rows the bot meant to
delete; with SQLite, from the bytes of its files too (free pages, the write-ahead log). Bytes
(checkpoint blobs are msgpack, whose strings are stored as UTF-8) are searched as bytes.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql


def tables_containing(database: str, needle: str) -> list[str]:
    """The tables of `database` (a SQLite path or a postgresql:// URL) with a row holding `needle`."""
    rows = _postgres_rows(database) if database.startswith("postgresql") else _sqlite_rows(database)
    return sorted({table for table, row in rows if any(_holds(value, needle) for value in row)})


def files_containing(database: str, needle: str) -> list[str]:
    """The files of a SQLite `database` (the database, its write-ahead log and the log's index)
    whose bytes hold `needle`, deleted rows or old page images included; none for PostgreSQL."""
    if database.startswith("postgresql"):
        return []
    paths = [Path(f"{database}{suffix}") for suffix in ("", "-wal", "-shm")]
    return [path.name for path in paths if path.exists() and needle.encode() in path.read_bytes()]


def _holds(value: Any, needle: str) -> bool:
    if isinstance(value, bytes | bytearray | memoryview):
        return needle.encode() in bytes(value)
    if isinstance(value, str):
        return needle in value
    if value is None or isinstance(value, int | float | bool):
        return False
    return needle in json.dumps(value, default=str)


def _sqlite_rows(path: str) -> list[tuple[str, tuple[Any, ...]]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return [(name, row) for name in names for row in connection.execute(f'SELECT * FROM "{name}"')]


def _postgres_rows(url: str) -> list[tuple[str, tuple[Any, ...]]]:
    with psycopg.connect(url) as connection:
        names = [
            row[0]
            for row in connection.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
        ]
        return [
            (name, row)
            for name in names
            for row in connection.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(name)))
        ]
