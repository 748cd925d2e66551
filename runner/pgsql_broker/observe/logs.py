"""Log lines as JSON or text; job lines carry job_id, database and queue.

Job names, errors, tenant ids and role names come from enqueuers: text lines show control, line- and
paragraph-separator and bidirectional-override characters escaped (\\n, \\x1b, \\u202e), and field values
with spaces, quotes or '=' quoted, so no enqueued text can forge a line or reach a terminal as an escape
sequence. JSON lines are escaped by the encoder (ensure_ascii).
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import time

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}

# C0 and C1 controls, DEL, line/paragraph separators, bidirectional marks, overrides and isolates
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# what the runner keeps, logs and serves of one error message (the extension stores at most 2,000
# characters and a truncation marker: broker._error_text)
MAX_ERROR_CHARS = 4000
MAX_LABEL_CHARS = 200  # tenant ids shown in metric labels and the dashboard


def _escape_char(match: re.Match) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def safe_text(value: object) -> str:
    """str(value) with every control, separator and bidi character escaped: safe for one terminal line."""
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape_char, text)


def cap_text(text: str | None, limit: int = MAX_ERROR_CHARS) -> str | None:
    """text cut to `limit` characters, with a marker saying how long it was."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]} [truncated by the runner from {len(text)} characters]"


def short_label(text: str, limit: int = MAX_LABEL_CHARS) -> str:
    """A tenant id as a metric label or dashboard cell: at most `limit` characters; a longer one keeps its
    start and a digest of the whole (distinct ids stay distinct). Without strict tenancy any role can set any
    tenant id (broker.tenant_id is an ordinary setting), of any length."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    suffix = f"...[{len(text)} chars, {digest}]"
    return text[:limit - len(suffix)] + suffix


def _field(value: object) -> str:
    """A logfmt value: as it is, or in double quotes (backslash and quote escaped) when it has a space, '=' or
    a quote; control characters escaped either way."""
    raw = value if isinstance(value, str) else str(value)
    text = safe_text(raw)
    if text and not any(c in text for c in ' ="'):
        return text
    return '"' + safe_text(raw.replace("\\", "\\\\").replace('"', '\\"')) + '"'


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                          + f".{int(record.msecs):03d}Z",
                 "level": record.levelname.lower(), "msg": record.getMessage()}
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={_field(v)}" for k, v in vars(record).items() if k not in _STANDARD)
        line = f"{self.formatTime(record)} {record.levelname.lower():7s} {safe_text(record.getMessage())}"
        line = f"{line} {fields}".rstrip()
        if record.exc_info:  # the traceback below, each of its lines indented and escaped
            line += "".join(f"\n    | {safe_text(part)}" for part in self.formatException(record.exc_info).splitlines())
        return line


class RateLimitedWarning:
    """A warning about something any login can cause (a malformed NOTIFY): the first occurrence is logged at
    once, later ones at most once per `interval` seconds, with how many there were since the last line."""

    def __init__(self, logger: logging.Logger, message: str, fields: dict, interval: float = 60.0,
                 clock=time.monotonic):
        self.logger, self.message, self.fields, self.interval, self.clock = logger, message, fields, interval, clock
        self.count, self.last = 0, None

    def hit(self, **sample) -> bool:
        """Count one occurrence; returns whether a line was logged."""
        self.count += 1
        now = self.clock()
        if self.last is not None and now - self.last < self.interval:
            return False
        self.last = now
        sample = {k: (v[:200] if isinstance(v, str) else v) for k, v in sample.items()}
        self.logger.warning(f"{self.message}: %d since the last report", self.count,
                            extra=self.fields | sample | {"count": self.count})
        self.count = 0
        return True


def configure(level: str = "info", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger("pgsql_broker")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
