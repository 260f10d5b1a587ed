"""Tests wait for states, not for guessed seconds (tests/waiting.py): every `time.sleep` / `asyncio.sleep` call in
tests/ either is gone or says why the time must pass (`# sleep: <why>` on its line)."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from tests.waiting import async_wait_until, async_wait_until_answered, holds_for, wait_until

TESTS = Path(__file__).resolve().parent
MARK = "# sleep:"


def unmarked_sleeps(source: str) -> list[int]:
    """Lines of the `time.sleep(...)`, `asyncio.sleep(...)` or bare `sleep(...)` calls without the mark (on any
    line of the call). Code in strings (a child program's) is not a call here."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            is_sleep = (
                func.attr == "sleep" and isinstance(func.value, ast.Name) and func.value.id in ("time", "asyncio")
            )
        else:
            is_sleep = isinstance(func, ast.Name) and func.id == "sleep"
        end = node.end_lineno or node.lineno
        if is_sleep and not any(MARK in line for line in lines[node.lineno - 1 : end]):
            found.append(node.lineno)
    return sorted(found)


def test_every_sleep_in_the_tests_says_why_the_time_must_pass() -> None:
    unmarked = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in unmarked_sleeps(path.read_text())
    ]
    assert not unmarked, f"wait for the state with tests/waiting.py, or mark the sleep `{MARK} <why>`: {unmarked}"


def test_the_scan_sees_calls_not_strings_nor_fake_clocks() -> None:
    source = (
        "import time, asyncio\n"
        "time.sleep(1)\n"
        "time.sleep(2)  # sleep: a duty cycle\n"
        "program = 'import time; time.sleep(3)'\n"
        "clock.sleep(4)\n"
        "async def f():\n"
        "    await asyncio.sleep(5)\n"
        "time.sleep(\n"
        "    6\n"
        ")  # sleep: marked on its last line\n"
    )
    assert unmarked_sleeps(source) == [2, 7]


def test_wait_until_returns_the_first_truthy_value_and_names_what_it_waited_for() -> None:
    looks = iter([0, None, "ready"])
    assert wait_until("a value", lambda: next(looks), timeout=5, interval=0) == "ready"
    with pytest.raises(AssertionError, match=r"not within 0\.1s: the moon: still cheese"):
        wait_until("the moon", lambda: False, timeout=0.1, interval=0.01, detail=lambda: "still cheese")


def test_holds_for_fails_at_the_first_look_that_finds_it_false() -> None:
    looks = iter([True, True, False])
    with pytest.raises(AssertionError, match="no longer true: it holds"):
        holds_for("it holds", lambda: next(looks), seconds=5, interval=0)
    holds_for("it holds", lambda: True, seconds=0.05, interval=0.01)


def test_async_wait_until_takes_plain_checks_and_answered_ones_awaited_questions() -> None:
    async def scenario() -> tuple[int, str]:
        counts = iter(range(5))

        async def asked() -> str:
            return "answered"

        return await async_wait_until("a count", lambda: next(counts), interval=0), await async_wait_until_answered(
            "an answer", asked
        )

    assert asyncio.run(scenario()) == (1, "answered")
