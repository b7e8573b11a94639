"""Text made fit to show: bounded first without uncovering a secret, escaped for terminals."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lane_runner import display, redact

SECRET = "s3cr3t-Planted"


def test_short_text_is_kept_and_long_text_says_what_was_left_out() -> None:
    assert display.clipped("short", 10) == "short"
    assert display.clipped("one two three", 7) == "one two… [6 more characters]"


def test_no_cut_uncovers_part_of_a_password() -> None:
    """Cut before its ``@``, a URL's password no longer looks like one to redaction:
    the half URL is left out whole, at whatever length the cut falls."""
    text = f"connect to postgresql://bob:{SECRET}@db.example/x failed"
    for limit in range(len(text) + 2):
        shown = redact.shown(text, limit)
        assert SECRET[:3] not in shown, (limit, shown)


@given(st.text(max_size=300), st.integers(min_value=0, max_value=300))
def test_clipped_is_a_prefix_and_bounded(text: str, limit: int) -> None:
    shown = display.clipped(text, limit)
    head = shown.split("… [")[0] if len(text) > limit else shown
    assert text.startswith(head) and len(head) <= limit


def test_escaped_shows_control_characters_and_keeps_tabs() -> None:
    assert display.escaped("a\tb\x1b[2J\rc\nd") == "a\tb\\x1b[2J\\x0dc\\x0ad"
    assert display.escaped("x\ny\x9b", keep_newlines=True) == "x\ny\\x9b"
