"""Where a conversation's CPU goes inside the bot: the served process profiled while it works.

Sampling profilers lose the stacks of a bot forked from the benchmark, so the bot runs under this
module instead (``python benchmarks/bot_profile.py serve --http …``): it is the bot's own command
line with yappi (CPU clock, every thread) switched on by ``SIGUSR1`` and its figures written by
``SIGUSR2``, so that a harness profiles exactly the phase it measures (``bot_load.py --profile``).
While switched on it also counts the statements the bot's SQLAlchemy engines send and the
checkpointer's writes.

The figures are split by what the code is (`CATEGORIES`, by the file a function lives in, each
function's own time, so nothing is counted twice): the agent loop, the model SDK, the checkpointer,
the bot's statements (SQLAlchemy and the database drivers), the bot's store code, the Slack Web API
client, Bolt's dispatch, aiohttp, rendering, JSON, pydantic, asyncio, logging, the rest of the bot;
the standard library's time goes to whoever called it (`seconds_by_category`).
yappi slows what it profiles by about a half, unevenly: read the shares, and the milliseconds as
the shares of the CPU an unprofiled run of the same load used.
"""

from __future__ import annotations

import gc
import json
import os
import pstats
import signal
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

PROFILE_ENV = "RUBRIC_BOT_BENCH_PROFILE"
"""The file the profiled bot writes its figures to (JSON, see `dump`) when it gets ``SIGUSR2``."""

CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("checkpointer", ("langgraph/checkpoint",)),
    (
        "model SDK (openai, httpx)",
        ("/openai/", "/httpx/", "/httpcore/", "/anyio/", "/h11/", "langchain_openai"),
    ),
    ("agent loop (langchain, langgraph, grading)", ("/langchain", "/langgraph", "/grading/")),
    ("statements (SQLAlchemy, drivers)", ("/sqlalchemy/", "/aiosqlite/", "/psycopg", "/greenlet", "sqlite3")),
    ("procrastinate", ("/procrastinate/",)),
    ("bot store (bot/db)", ("/bot/db/",)),
    ("Slack Web API client", ("/slack_sdk/",)),
    ("Bolt dispatch", ("/slack_bolt/",)),
    ("aiohttp", ("/aiohttp/", "/multidict/", "/yarl/", "/aiosignal/", "/frozenlist/")),
    (
        "rendering",
        (
            "/bot/rendering/",
            "/bot/slack/blocks",
            "/bot/slack/markdown",
            "/bot/slack/mrkdwn",
            "/markdown_it/",
            "markdown_to_mrkdwn",
            "/bot/streaming/plan",
        ),
    ),
    ("JSON", ("/json/", "orjson", "ormsgpack")),
    ("pydantic", ("/pydantic",)),
    ("logging", ("/logging/",)),
    ("asyncio, uvloop", ("/asyncio/", "uvloop", "/selectors", "/concurrent/", "/threading")),
    ("the bot's other code", ("/bot/",)),
)
"""Each category with the path fragments of the files whose functions' own time it takes; the
first that matches wins (the checkpointer before langgraph, the bot's store before the bot)."""
OTHER = "other (stdlib, typing, copy, uuid, …)"
"""Where a function none of `CATEGORIES` names is counted."""


def category_of(path: str) -> str:
    """The category of a function defined in `path` (yappi names builtins ``..``)."""
    for name, fragments in CATEGORIES:
        if any(fragment in path for fragment in fragments):
            return name
    return OTHER


STATEMENTS: Counter[str] = Counter()
"""The SQL statements the bot's SQLAlchemy engines sent while the profile was on (its tables, not
the checkpointer's), by their first words (reset by `start`)."""
STATEMENT_WORDS = 8
"""How many words of a statement name it in `STATEMENTS`."""


def _count_statement(_connection: object, _cursor: object, statement: str, *_: object) -> None:
    STATEMENTS[" ".join(statement.split()[:STATEMENT_WORDS])] += 1


GC_PASSES: Counter[str] = Counter()
"""The garbage collector's passes while the profile is on, by generation, and their CPU seconds
(``"seconds"``): yappi counts a pass as the own time of whichever function's allocation set it off."""

_gc_started = 0.0


def _time_gc(phase: str, info: dict[str, int]) -> None:
    """A `gc.callbacks` entry: count each pass and its CPU time."""
    global _gc_started
    if phase == "start":
        _gc_started = time.thread_time()
        return
    GC_PASSES[f"generation {info['generation']}"] += 1
    GC_PASSES["seconds"] += time.thread_time() - _gc_started


def start(*_: object) -> None:
    """Clear and switch on the profile (the handler of ``SIGUSR1``)."""
    import yappi

    yappi.stop()
    yappi.clear_stats()
    STATEMENTS.clear()
    GC_PASSES.clear()
    if _time_gc not in gc.callbacks:
        gc.callbacks.append(_time_gc)
    yappi.set_clock_type("cpu")
    yappi.start(builtins=False, profile_threads=True)


def dump(*_: object) -> None:
    """Switch the profile off and write it (pstats) beside the statements counted, the checkpoint
    writes and each thread's time (the handler of ``SIGUSR2``)."""
    import yappi

    yappi.stop()
    if _time_gc in gc.callbacks:
        gc.callbacks.remove(_time_gc)
    stats = yappi.get_func_stats()
    path = os.environ[PROFILE_ENV]
    stats.save(f"{path}.pstat", type="pstat")
    calls = Counter({stat.name: stat.ncall for stat in stats})
    figures = {
        "statements": dict(STATEMENTS),
        "checkpoint_writes": calls["AsyncSqliteSaver.aput"] + calls["AsyncPostgresSaver.aput"],
        "threads": {thread.name: thread.ttot for thread in yappi.get_thread_stats()},
        "gc": dict(GC_PASSES),
    }
    Path(path).write_text(json.dumps(figures))


Function = tuple[str, int, str]
"""pstats' key of a function: its file, first line and name."""


def seconds_by_category(profiles: list[pstats.Stats]) -> Counter[str]:
    """Each category's seconds: a function's own time goes to its category, and the own time of a
    function no category names (the standard library's: typing, email, copy…) to its callers'
    categories, in proportion to the time each spent calling it, up to the nearest that has one.
    Where the time of ``typing.get_origin`` goes is what it was called for."""
    seconds: Counter[str] = Counter()
    for profile in profiles:
        shares = _CategoryShares(profile.stats)  # type: ignore[attr-defined]
        for function, row in shares.table.items():
            for name, part in shares.of(function).items():
                seconds[name] += row[2] * part
    return seconds


class _CategoryShares:
    """The categories a function's own time goes to, as shares (see `seconds_by_category`)."""

    def __init__(self, table: dict[Function, tuple]) -> None:  # type: ignore[type-arg]
        self.table = table
        self._found: dict[Function, Counter[str]] = {}

    def of(self, function: Function, seen: frozenset[Function] = frozenset()) -> Counter[str]:
        if function in self._found:
            return self._found[function]
        own = category_of(function[0])
        callers = self.table[function][4] if function in self.table else {}
        found: Counter[str] = Counter()
        if own != OTHER or not callers or function in seen:
            found[own] = 1.0
        else:
            total = sum(each[3] for each in callers.values()) or 1.0
            for caller, each in callers.items():
                for name, part in self.of(caller, seen | {function}).items():
                    found[name] += part * each[3] / total
        self._found[function] = found
        return found


def top_functions(profile: pstats.Stats, count: int) -> list[tuple[float, str]]:
    """The `count` functions with the most own time: (seconds, where)."""
    table = profile.stats  # type: ignore[attr-defined]
    ranked = sorted(table.items(), key=lambda item: -item[1][2])[:count]
    return [(row[2], f"{name} ({Path(path).name}:{line})") for (path, line, name), row in ranked]


def category_table(seconds: Mapping[str, float], cpu_ms_per_conversation: float) -> list[str]:
    """The profile as lines: each category's share of the profiled time and that share of the CPU
    an unprofiled conversation used."""
    total = sum(seconds.values()) or 1.0
    lines = [f"  {'where':<44}{'share':>7}{'ms/conv':>9}"]
    for name, value in sorted(seconds.items(), key=lambda item: -item[1]):
        share = value / total
        lines.append(f"  {name:<44}{100 * share:>6.1f}%{share * cpu_ms_per_conversation:>9.1f}")
    return lines


def _install() -> None:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "before_cursor_execute", _count_statement)
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, dump)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    _install()
    from bot.cli.main import main

    raise SystemExit(main(sys.argv[1:]))
