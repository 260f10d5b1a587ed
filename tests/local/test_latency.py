"""The latency helpers: duration parsing, and the delay line refusing bad arguments (built for real: `make setup`
installs gcc and libnetfilter-queue-dev)."""

from __future__ import annotations

import subprocess

import pytest

from miniclusters.backends.local import latency


@pytest.mark.parametrize(("text", "expected"), [("500us", 500.0), ("2ms", 2000.0), ("0.1s", 100000.0)])
def test_durations_convert_to_microseconds(text: str, expected: float) -> None:
    assert latency.microseconds(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["fast", "5", "-1ms", "2 ms", "1m"])
def test_bad_durations_are_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration like 2ms"):
        latency.microseconds(text)


@pytest.mark.parametrize("text", ["0ms", "0us", "10.5s", "11s"])
def test_delays_the_delay_line_cannot_hold_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="above 0 and at most 10s"):
        latency.microseconds(text)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [((), "usage: mc-delayline QUEUE DELAY_US"), (("0", "0"), "DELAY_US 0"), (("x", "5"), "QUEUE x")],
)
def test_delay_line_refuses_bad_arguments(arguments: tuple[str, ...], message: str) -> None:
    binary = latency.build_delay_line()
    result = subprocess.run([str(binary), *arguments], capture_output=True, text=True, timeout=10)
    assert result.returncode == 2 and message in result.stderr
