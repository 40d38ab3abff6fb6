"""Find a pattern a test expects on a page, failing with what was missing rather than an AttributeError on None."""

from __future__ import annotations

import re


def must_search(pattern: str, text: str, flags: int = 0) -> re.Match[str]:
    """Return the first match of `pattern` in `text`; fail the test when there is none."""
    match = re.search(pattern, text, flags)
    assert match is not None, f"expected {pattern!r} in the text"
    return match
