"""A slow, obviously-correct reference for broker_cron_next, minute by minute (zoneinfo).

Walks UTC minutes after `after` and fires at the first instant t where either
  * the wall time of t in the zone matches the fields, and t is its first occurrence
    (or the schedule is a wildcard one, which fires at every occurrence), or
  * the clocks jumped forward right at t, the schedule is fixed-time, and one of the
    skipped wall minutes matches (ISC cron: it fires once, at the first instant after the jump).
Fields are parsed here independently of the extension (a small Vixie cron parser).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


def _field(text: str, lo: int, hi: int, names: list[str] | None) -> set[int]:
    def value(tok: str) -> int:
        if names and tok in names:
            return names.index(tok) + lo
        v = int(tok)
        if not lo <= v <= hi:
            raise ValueError(tok)
        return v

    out: set[int] = set()
    for item in text.split(","):
        base, _, step = item.partition("/")
        if base == "*":
            a, b = lo, hi
        elif "-" in base:
            a, b = (value(x) for x in base.split("-"))
        else:
            a = value(base)
            b = hi if step else a
        out.update(range(a, b + 1, int(step) if step else 1))
    return out


class Cron:
    def __init__(self, expr: str):
        fields = MACROS.get(expr.strip().lower(), expr).lower().split()
        self.minutes = _field(fields[0], 0, 59, None)
        self.hours = _field(fields[1], 0, 23, None)
        self.days = _field(fields[2], 1, 31, None)
        self.months = _field(fields[3], 1, 12, MONTHS)
        self.dows = {d % 7 for d in _field(fields[4], 0, 7, DAYS)}
        self.day_and = fields[2].startswith("*") or fields[4].startswith("*")
        self.fixed = not fields[0].startswith("*") and not fields[1].startswith("*")

    def day_matches(self, wall: datetime) -> bool:
        if wall.month not in self.months:
            return False
        dom, dow = wall.day in self.days, (wall.isoweekday() % 7) in self.dows
        return (dom and dow) if self.day_and else (dom or dow)

    def matches(self, wall: datetime) -> bool:
        return wall.minute in self.minutes and wall.hour in self.hours and self.day_matches(wall)


def cron_next(expr: str, after: datetime, tz: str = "UTC", horizon: timedelta = timedelta(days=8)) -> datetime | None:
    cron, zone = Cron(expr), ZoneInfo(tz)
    t = after.astimezone(timezone.utc).replace(second=0, microsecond=0) + timedelta(minutes=1)
    prev_wall = (t - timedelta(minutes=1)).astimezone(zone).replace(tzinfo=None)
    end = t + horizon
    while t <= end:
        if tz == "UTC" and not cron.day_matches(t):  # no offsets to worry about: skip the day
            t = t.replace(hour=0, minute=0) + timedelta(days=1)
            prev_wall = (t - timedelta(minutes=1)).replace(tzinfo=None)
            continue
        local = t.astimezone(zone)
        wall = local.replace(tzinfo=None, fold=0)
        if wall > prev_wall + timedelta(minutes=1) and cron.fixed:  # clocks jumped forward right at t
            skipped = prev_wall + timedelta(minutes=1)
            while skipped < wall:
                if cron.matches(skipped):
                    return t
                skipped += timedelta(minutes=1)
        if cron.matches(wall):
            # is t the first occurrence of this wall time? (a second one has fold=1 in zoneinfo)
            if not cron.fixed or local.replace(fold=0).astimezone(timezone.utc) == t:
                return t
        prev_wall = wall
        t += timedelta(minutes=1)
    return None
