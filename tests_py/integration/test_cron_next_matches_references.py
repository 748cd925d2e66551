"""broker_cron_next against two independent references, on thousands of random expressions.

* UTC: croniter (PyPI) where it follows Vixie cron. It departs in three places, measured here:
  1. the day rule: Vixie ANDs day-of-month and day-of-week when either field *starts with* `*`
     (so `*/7` counts as a star); croniter only when a field *is* `*`;
  2. ranges whose ends are equal (`20-20`, `aug-aug`, `sun-0`): croniter mis-reads them (it fires
     at other values, such as minute 0 for `37-37/24`);
  3. a start-only step in the day-of-week field (`5/2`): Vixie/cronie run it to 7 (Sunday), since
     that field's range is 0-7; croniter stops at 6;
  4. a `*` item inside a list in a day field (`sun,*/1`): croniter applies its day rule differently.
  Expressions in those classes are checked against our own reference (tests_py/cron_reference.py)
  instead, and the test asserts that croniter really disagrees on some of them.
* Time zones with daylight saving: the same reference, a minute-by-minute walk with zoneinfo.
"""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from conftest import connect
from cron_reference import MONTHS, DAYS, cron_next as reference_next

RNG_SEED = 20261129
FIELDS = [(0, 59, None), (0, 23, None), (1, 31, None), (1, 12, MONTHS), (0, 7, DAYS)]


def _item(rng: random.Random, lo: int, hi: int, names: list[str] | None) -> str:
    def val(v: int) -> str:
        if names and rng.random() < 0.3 and v - lo < len(names):
            name = names[v - lo]
            return name.upper() if rng.random() < 0.3 else name
        return str(v)

    kind = rng.choice(["value", "range", "range_step", "star_step", "start_step"])
    a = rng.randint(lo, hi)
    b = rng.randint(min(a + 1, hi), hi)  # a-a ranges are rare in practice (and croniter mis-reads them)
    step = rng.randint(1, max(1, (hi - lo) // 2))
    return {"value": val(a), "range": f"{val(a)}-{val(b)}", "range_step": f"{val(a)}-{val(b)}/{step}",
            "star_step": f"*/{step}", "start_step": f"{a}/{step}"}[kind]


def random_expression(rng: random.Random, day_fields: bool = True) -> str:
    fields = []
    for i, (lo, hi, names) in enumerate(FIELDS):
        star_weight = 0.2 if i < 2 else 0.5
        if (not day_fields and i >= 2) or rng.random() < star_weight:
            fields.append("*")
        else:
            fields.append(",".join(_item(rng, lo, hi, names) for _ in range(rng.choice([1, 1, 1, 2, 3]))))
    return " ".join(fields)


def croniter_departs(expr: str) -> bool:
    """Does the expression fall in one of the classes where croniter departs from Vixie cron?"""
    fields = expr.lower().split()
    dom, dow = fields[2], fields[4]
    if (dom.startswith("*") and dom != "*" and dow != "*") or (dow.startswith("*") and dow != "*" and dom != "*"):
        return True
    if any("," in f and "*" in f for f in (dom, dow)):
        return True
    for i, (field, (lo, _, names)) in enumerate(zip(fields, FIELDS)):
        for item in field.split(","):
            base = item.split("/")[0]
            if i == 4 and "/" in item and "-" not in base and base != "*":
                return True
            if "-" in base:
                a, b = (names.index(x) + lo if names and x in names else int(x) for x in base.split("-"))
                if a % 7 == b % 7 if i == 4 else a == b:
                    return True
    return False


def broker_next(conn, cases: list[tuple[str, datetime, str]]) -> list[datetime | None]:
    rows = conn.execute(
        "SELECT broker.broker_cron_next(e, a, z) FROM unnest(%s::text[], %s::timestamptz[], %s::text[])"
        " WITH ORDINALITY AS t(e, a, z, n) ORDER BY n",
        ([c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases])).fetchall()
    return [r[0] for r in rows]


def test_utc_against_croniter(db):
    rng = random.Random(RNG_SEED)
    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    cases = [(random_expression(rng), start + timedelta(seconds=rng.randint(0, 10 * 365 * 86400)), "UTC")
             for _ in range(3000)]
    with connect(db) as conn:
        ours = broker_next(conn, cases)
    compared, departures, mismatches = 0, 0, []
    for (expr, after, _), got in zip(cases, ours):
        if croniter_departs(expr):
            departures += croniter(expr, after).get_next(datetime) != got
            expected = reference_next(expr, after, horizon=timedelta(days=3000))
        else:
            compared += 1
            expected = croniter(expr, after).get_next(datetime)
        if got != expected:
            mismatches.append((expr, after, got, expected))
    assert mismatches == []
    assert compared > 1500, "most random expressions must be compared with croniter"
    assert departures > 100, "croniter should really disagree on the excluded classes"


ZONED = ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "Asia/Kathmandu",
         "Pacific/Chatham", "Europe/London", "America/St_Johns"]


def _transitions(zone: str, year: int) -> list[datetime]:
    """UTC instants (to the minute) where the zone's offset changes in that year."""
    tz, out = ZoneInfo(zone), []
    t = datetime(year, 1, 1, tzinfo=timezone.utc)
    step = timedelta(hours=1)
    while t.year == year:
        if (t + step).astimezone(tz).utcoffset() != t.astimezone(tz).utcoffset():
            m = t
            while m.astimezone(tz).utcoffset() == t.astimezone(tz).utcoffset():
                m += timedelta(minutes=1)
            out.append(m)
        t += step
    return out


def test_daylight_saving_against_reference(db):
    rng = random.Random(RNG_SEED + 1)
    cases = []
    for zone in ZONED:
        moments = _transitions(zone, 2025) or [datetime(2025, 6, 1, tzinfo=timezone.utc)]
        for _ in range(50):
            around = rng.choice(moments) + timedelta(minutes=rng.randint(-26 * 60, 2 * 60))
            # fixed-time and wildcard schedules that fire at least daily, so the minute walk stays short
            expr = random_expression(rng, day_fields=False)
            if rng.random() < 0.3:
                expr = f"{rng.randint(0, 59)} {rng.choice([1, 2, 3])} * * *"
            cases.append((expr, around, zone))
    with connect(db) as conn:
        ours = broker_next(conn, cases)
    mismatches = [(e, a, z, got, exp) for (e, a, z), got in zip(cases, ours)
                  if got != (exp := reference_next(e, a, z, horizon=timedelta(days=3)))]
    assert mismatches == []
    assert len(cases) == 50 * len(ZONED)


def test_a_whole_fall_back_night_fire_by_fire(db):
    """Iterating fire to fire through a night: wildcard schedules fire in both passes, fixed ones once."""
    with connect(db) as conn:
        def series(expr: str, zone: str, start: str, n: int) -> list[str]:
            rows = conn.execute("""
                WITH RECURSIVE f(t, i) AS (SELECT broker.broker_cron_next(%(e)s, %(s)s::timestamptz, %(z)s), 1
                                           UNION ALL
                                           SELECT broker.broker_cron_next(%(e)s, t, %(z)s), i + 1 FROM f WHERE i < %(n)s)
                SELECT to_char(t AT TIME ZONE 'UTC', 'HH24:MI') FROM f ORDER BY i""",
                {"e": expr, "s": start, "z": zone, "n": n}).fetchall()
            return [r[0] for r in rows]

        # New York, 2025-11-02: 01:00-01:59 happens twice (05:00-05:59 and 06:00-06:59 UTC)
        assert series("*/30 1 * * *", "America/New_York", "2025-11-02 04:00Z", 4) == ["05:00", "05:30", "06:00", "06:30"]
        assert series("0,30 1 * * *", "America/New_York", "2025-11-02 04:00Z", 3) == ["05:00", "05:30", "06:00"]  # next day


@pytest.mark.parametrize("zone", ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe"])
def test_every_time_around_a_spring_forward_jump(db, zone):
    """Fixed-time schedules at every 5 minutes from 00:00 to 03:55 on the night clocks jump forward."""
    tz = ZoneInfo(zone)
    jump = next(m for m in _transitions(zone, 2025)
                if m.astimezone(tz).utcoffset() > (m - timedelta(minutes=1)).astimezone(tz).utcoffset())
    start = jump - timedelta(hours=20)
    cases = [(f"{minute} {hour} * * *", start, zone) for hour in range(0, 4) for minute in range(0, 60, 5)]
    with connect(db) as conn:
        ours = broker_next(conn, cases)
    for (expr, after, _), got in zip(cases, ours):
        assert got == reference_next(expr, after, zone, horizon=timedelta(days=2)), expr
