"""Suite-wide setup."""

from __future__ import annotations

import os

import pytest

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
"""Every test talks only to servers on loopback; a developer's proxy settings would reroute that
traffic (slack_sdk honours these but not NO_PROXY), so they are removed for the whole run,
bot subprocesses included."""


def pytest_configure(config: pytest.Config) -> None:
    for name in PROXY_VARIABLES:
        os.environ.pop(name, None)
        os.environ.pop(name.lower(), None)
