"""The PostgreSQL server the tests use: `RUBRIC_BOT_TEST_PG`, a libpq URL (`.ci/run` sets it)."""

from __future__ import annotations

import os

import pytest

TEST_PG_VARIABLE = "RUBRIC_BOT_TEST_PG"
"""Names the test server, e.g. postgresql://USER:PASSWORD@127.0.0.1/DBNAME."""


def postgres_server() -> str:
    """The test server's URL; skips the test when unset, except under CI, where that fails it."""
    url = os.environ.get(TEST_PG_VARIABLE)
    if url:
        return url
    message = f"PostgreSQL tests need {TEST_PG_VARIABLE}=postgresql://USER:PASSWORD@HOST/DBNAME"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
