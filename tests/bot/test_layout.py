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


MAX_MODULE_LINES = 600
"""No module of `bot/` is longer (migrations aside): a longer one holds more than one idea."""

FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"vocabulary"}),
    frozenset({"db"}),
    frozenset(
        {
            "config",
            "settings",
            "agent",
            "slack",
            "ops",
            "material",
            "threads",
            "queue",
            "rendering",
            "review",
            "agreement",
            "limits",
            "governance",
            "workspaces",
            "lifecycle",
            "streaming",
            "assistant",
            "audit",
            "provenance",
            "export",
            "feedback",
            "sessions",
            "trust",
            "shadow",
            "proposals",
        }
    ),
    frozenset({"home", "listeners"}),
    frozenset({"app"}),
    frozenset({"cli", "__main__"}),
)
"""The floors of `bot/`, lowest first: the words every floor shares, the database, the features (and
the settings and the agent they share), the Slack surfaces that delegate to them, the app that wires
them, the terminal. A module imports from its own floor or below, never above."""


def module_name(path: Path) -> str:
    parts = path.relative_to(BOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(BOT.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """The modules of `bot` that `path` imports (the package where a name is not a module of its own)."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names if alias.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bot":
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                imported.add(submodule if submodule in MODULES else node.module)
    return imported - {"bot"}


IMPORTS = {name: imported_modules(path) for name, path in MODULES.items()}


def floor_of(module: str) -> int:
    part = module.split(".")[1]
    return next(number for number, parts in enumerate(FLOORS) if part in parts)


def test_every_folder_and_top_module_of_bot_is_on_one_floor():
    parts = {name.split(".")[1] for name in MODULES if name != "bot"}
    placed = [part for floor in FLOORS for part in floor]

    assert sorted(placed) == sorted(parts)


def test_no_import_runs_back_up_a_floor():
    upward = [
        f"{module} -> {target}"
        for module, targets in IMPORTS.items()
        if module != "bot"
        for target in sorted(targets)
        if floor_of(target) > floor_of(module)
    ]

    assert upward == []


def test_the_modules_of_bot_import_each_other_without_a_cycle():
    done: set[str] = set()
    path: list[str] = []

    def cycle_from(module: str) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        path.append(module)
        for target in sorted(IMPORTS[module]):
            if found := cycle_from(target):
                return found
        path.pop()
        done.add(module)
        return []

    assert [found for module in sorted(IMPORTS) if (found := cycle_from(module))] == []


def test_no_module_of_bot_is_over_600_lines_migrations_aside():
    long = {
        name: lines
        for name, path in MODULES.items()
        if "migrations" not in path.relative_to(BOT).parts
        and (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }

    assert long == {}


def folder_of(module: str) -> str:
    """The folder of `bot` a module is in; a module at the top is a folder of its own."""
    return module.split(".")[1]


FOLDER_IMPORTS = {
    folder: {
        folder_of(target)
        for module, targets in IMPORTS.items()
        if module != "bot" and folder_of(module) == folder
        for target in targets
    }
    - {folder}
    for folder in {folder_of(module) for module in MODULES if module != "bot"}
}
"""The imports of `bot` folded to its folders: what each folder imports of the others."""


def test_no_folder_of_bot_imports_a_folder_that_imports_it_back():
    """A folder-level cycle ties two features into one: neither can be read, tested or moved alone."""
    done: set[str] = set()
    path: list[str] = []

    def cycle_from(folder: str) -> list[str]:
        if folder in path:
            return [*path[path.index(folder) :], folder]
        if folder in done:
            return []
        path.append(folder)
        for target in sorted(FOLDER_IMPORTS[folder]):
            if found := cycle_from(target):
                return found
        path.pop()
        done.add(folder)
        return []

    assert [found for folder in sorted(FOLDER_IMPORTS) if (found := cycle_from(folder))] == []


LOOP_IMPORTERS = frozenset({"threads", "app", "listeners", "home", "cli"})
"""The folders that may import `bot/threads/` (the loop): itself, and the entry points above it."""


def test_the_loop_in_threads_is_imported_only_by_the_entry_points_above_it():
    importers = sorted(
        module
        for module, targets in IMPORTS.items()
        if module != "bot" and any(folder_of(target) == "threads" for target in targets)
    )

    assert [module for module in importers if folder_of(module) not in LOOP_IMPORTERS] == []
