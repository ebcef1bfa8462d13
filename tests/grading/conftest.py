"""Fixtures of the grading tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.grading.agents import invoke_async, invoke_sync


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Any:
    """Runs an agent once through `invoke` or `ainvoke`, so every behaviour is checked on both paths."""
    return invoke_sync if request.param == "sync" else invoke_async
