"""`grading` stands alone: a langchain user can use it with no Slack installed."""

import subprocess
import sys

import grading


def test_importing_grading_loads_no_slack_and_no_bot_code():
    probe = (
        "import sys, grading; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'slack_sdk', 'slack_bolt', 'bot'}))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_the_public_api_is_importable_from_the_package():
    for name in grading.__all__:
        assert getattr(grading, name) is not None, name
