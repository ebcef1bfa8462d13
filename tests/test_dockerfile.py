"""The Docker image as it runs: as an unprivileged account of its own, never root, in a directory
that account owns (where the SQLite file goes)."""

from __future__ import annotations

import re
from pathlib import Path

DOCKERFILE = (Path(__file__).resolve().parents[1] / "Dockerfile").read_text()
INSTRUCTIONS = [
    line.strip() for line in DOCKERFILE.splitlines() if line.strip() and not line.lstrip().startswith("#")
]


def test_the_image_runs_as_an_unprivileged_user_that_owns_its_data_directory():
    users = [line.split()[1] for line in INSTRUCTIONS if line.startswith("USER ")]
    assert users, "the image runs as root: add a USER instruction"
    user = users[-1]
    assert user not in ("root", "0") and not user.startswith(("root:", "0:"))
    created = next(line for line in INSTRUCTIONS if re.search(rf"\buseradd\b.*\b{re.escape(user)}$", line))
    assert "--create-home" in created and "--home-dir /data" in created
    # The process starts after USER (nothing later switches back), in the account's own directory.
    last_user = max(i for i, line in enumerate(INSTRUCTIONS) if line.startswith("USER "))
    entry = max(i for i, line in enumerate(INSTRUCTIONS) if line.startswith(("ENTRYPOINT", "CMD")))
    assert last_user < entry
    workdirs = [line.split()[1] for line in INSTRUCTIONS[last_user:entry] if line.startswith("WORKDIR ")]
    assert workdirs[-1:] == ["/data"]
