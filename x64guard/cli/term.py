"""The terminal: colours and a progress bar, only when a person is watching.

Colours go to a stream that is a TTY, unless NO_COLOR is set (any value, see
no-color.org) or `--color never`; `--color always` forces them (CI logs that render
ANSI). The progress bar is drawn on stderr only when stderr is a TTY.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

_CODES = {"red": "31", "yellow": "33", "cyan": "36", "green": "32", "bold": "1", "dim": "2"}
SEVERITY_COLOURS = {"error": "red", "warning": "yellow", "info": "cyan"}


def wants_colour(stream, choice: str = "auto") -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return _isatty(stream) and os.environ.get("TERM") != "dumb"


class Style:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"

    def severity(self, severity: str) -> str:
        return self(severity, SEVERITY_COLOURS.get(severity, "bold"), "bold")


class Progress:
    """`[#####.....] 12/40 path` on stderr, redrawn at most 20 times a second, erased at the end."""

    def __init__(self, total: int, stream=None, min_total: int = 4):
        self.stream = stream or sys.stderr
        self.total = total
        self.enabled = total >= min_total and _isatty(self.stream)
        self._last = 0.0

    def __call__(self, index: int, label: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.05 and index + 1 < self.total:
            return
        self._last = now
        width = shutil.get_terminal_size((80, 20)).columns
        bar_width = 24
        filled = int(bar_width * index / max(self.total, 1))
        head = f"[{'#' * filled}{'.' * (bar_width - filled)}] {index + 1}/{self.total} "
        room = max(width - len(head) - 1, 0)
        if len(label) > room:
            label = "..." + label[-(room - 3):] if room > 3 else ""
        self.stream.write("\r" + head + label + " " * (room - len(label)))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            width = shutil.get_terminal_size((80, 20)).columns
            self.stream.write("\r" + " " * (width - 1) + "\r")
            self.stream.flush()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
