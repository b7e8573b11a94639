"""No text handling of ours is worse than linear: 2 MB of a hostile input against 1 KB.

A worker's summary, a CLI's error or stderr may be megabytes of anything, and each
reaches redaction, the log formatters, the failure classifier and the goal judge.
One quadratic pattern there held a daemon at 98 % CPU for ten minutes (issue 26,
finding 3). Each case is timed in a child process, as a ratio of two sizes, never
as an absolute time, in CPU time (a loaded machine delays a run, it does not make it
compute more); a case that would take hours is cut off and fails.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lane_runner import redact

SMALL, LARGE = 1024, 2 << 20
#: Linear work grows 2,048-fold from 1 KB to 2 MB; the margin covers caches and noise.
#: A quadratic one grows about 4,000,000-fold.
MOST_GROWTH = (LARGE // SMALL) * 8
#: Wall seconds a child may take: linear cases need a few CPU seconds, a quadratic one hours.
CUT_OFF = 600

#: Times ``function`` (an expression) on SMALL and LARGE characters of each unit
#: repeated; prints each unit's ratio of the best times, as JSON.
TIMING = """
import json, logging, sys, time
from lane_runner import display, redact
from lane_runner.providers.classify import Signals, classify_failure
from lane_runner.router.judge import structural_verdict
from lane_runner.router.route import bounded
from lane_runner.service.logs import JsonFormatter, TextFormatter

function = eval(sys.argv[1])
units, small, large = json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def best(unit, size, rounds):
    text = (unit * (size // len(unit) + 1))[:size]
    times = []
    for _ in range(rounds):
        start = time.thread_time()
        function(text)
        times.append(time.thread_time() - start)
    return min(times)


print(json.dumps({unit: best(unit, large, 1) / best(unit, small, 300) for unit in units}))
"""

FUNCTIONS = {
    "redact": "redact.text",
    "text log": "lambda t: TextFormatter().format(logging.makeLogRecord({'msg': t}))",
    "json log": "lambda t: JsonFormatter().format(logging.makeLogRecord({'msg': t}))",
    "classify": "lambda t: classify_failure(Signals(errors=[t[:2000]], stderr=t))",
    "judge": "lambda t: structural_verdict({'status': 'completed', 'summary': t, 'blockers': []})",
    "route reason": "bounded",
    "clipped": "lambda t: display.clipped(t, display.MAX_REASON_CHARS)",
    "escaped": "display.escaped",
}
#: Runs that patterns of the shape ``[set]*literal`` or ``\\S+ ...`` scan again from
#: every position of, plus the plain and the control-heavy.
UNITS = ["a-", "a:/", "x://", " ", "\x1b[", "session id ", "error: option '", "model `"]


def growth(function: str, units: list[str] = UNITS) -> dict[str, float]:
    """How many times longer ``function`` takes on 2 MB of each unit than on 1 KB."""
    try:
        child = subprocess.run(
            [sys.executable, "-c", TIMING, function, json.dumps(units), str(SMALL), str(LARGE)],
            capture_output=True, text=True, timeout=CUT_OFF, check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{function} on 2 MB of text ran past {CUT_OFF} s: worse than linear")
    ratios: dict[str, float] = json.loads(child.stdout)
    return ratios


@pytest.mark.parametrize("function", FUNCTIONS.values(), ids=FUNCTIONS.keys())
def test_two_megabytes_cost_at_most_linearly_more_than_one_kilobyte(function: str) -> None:
    ratios = growth(function)
    assert {unit: ratio for unit, ratio in ratios.items() if ratio >= MOST_GROWTH} == {}


#: The pattern ``redact.text`` used before it was made linear: its reference meaning.
QUADRATIC_REFERENCE = r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+"


@given(st.text(alphabet="a1+.-:/@ 'hs_xp?=", max_size=60))
def test_redaction_finds_the_urls_the_former_pattern_found(text: str) -> None:
    expected = re.sub(QUADRATIC_REFERENCE, lambda match: redact.url(match.group(0)), text)
    assert redact.urls(text) == expected


#: Runs each of the gate's other patterns could scan again from every position of: a
#: user without its ``@``, a name without its ``=``, a scheme without its credential,
#: a token's prefix without its length, a header without its value.
GATE_UNITS = [
    "a:a", "a:", ":@", "key", "key=", "token =", 'key":', "Bearer ", "bearer A1",
    "Basic a", "ghp_", "sk-a", "xoxb-", "AKIA", "authorization:", "proxy-authorization: ",
]
GATE = {"redact": "redact.text", "document": "lambda t: redact.document({'a': [t]})"}


@pytest.mark.parametrize("function", GATE.values(), ids=GATE.keys())
def test_the_gate_costs_at_most_linearly_more_on_its_own_hostile_runs(function: str) -> None:
    ratios = growth(function, GATE_UNITS)
    assert {unit: ratio for unit, ratio in ratios.items() if ratio >= MOST_GROWTH} == {}
