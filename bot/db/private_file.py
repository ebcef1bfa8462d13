"""The SQLite file and its companions (-wal, -shm, -journal) are private to the bot's account,
whatever the umask.

SQLite gives the -wal and -shm files it creates the permissions of the database file, so creating
that file 0600 before SQLite opens it is enough; files from before (created under a looser umask)
are tightened, with a log line saying so.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

logger = logging.getLogger(__name__)

PRIVATE_MODE = 0o600
"""Read and write for the owner only: conversations and reviews are nobody else's business."""

SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")
"""Suffixes of the files SQLite keeps for one database: the file itself, its write-ahead log, the
log's shared-memory index, and the rollback journal of a database not in WAL mode."""


def make_private(database: Path) -> None:
    """Create `database` (empty) 0600 if it is missing; tighten it and its companions if wider."""
    try:
        descriptor = os.open(database, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_MODE)
    except FileExistsError:
        pass
    except OSError:
        return  # a missing directory: SQLite's own error names it better
    else:
        os.fchmod(descriptor, PRIVATE_MODE)  # the umask may have taken bits the owner needs
        os.close(descriptor)
    for suffix in SQLITE_COMPANIONS:
        _tighten(Path(f"{database}{suffix}"))


def _tighten(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if mode & ~PRIVATE_MODE:
        path.chmod(PRIVATE_MODE)
        logger.warning("%s was readable by other accounts (mode %o); it is now %o", path, mode, PRIVATE_MODE)
