"""The layout of `bot/` tells its architecture: one folder per feature whose `__init__` docstring maps
every module in it, and only a few modules at the top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BOT = Path(__file__).resolve().parents[2] / "bot"
FOLDERS = sorted(p.parent for p in BOT.glob("*/__init__.py"))
MAX_TOP_MODULES = 8
"""At most this many modules directly in `bot/` (the issue that split it by feature set the bound)."""


def map_of(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


def test_bot_has_at_most_eight_modules_at_the_top_and_its_map_names_them_and_every_folder():
    modules = sorted(p.stem for p in BOT.glob("*.py") if p.stem != "__init__")

    assert len(modules) <= MAX_TOP_MODULES, modules
    text = map_of(BOT)
    assert [m for m in modules if f"``{m}``" not in text] == []
    assert [f.name for f in FOLDERS if f"``{f.name}/``" not in text] == []


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_each_feature_folders_map_has_one_line_per_module(folder: Path):
    modules = sorted(
        p.stem if p.is_file() else p.name
        for p in folder.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    )
    lines = [line for line in map_of(folder).splitlines() if line.startswith("- ``")]

    assert sorted(line.split("``")[1] for line in lines) == modules
