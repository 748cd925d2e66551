"""Session connections when the databases outnumber them: the databases take turns.

The runner's share of a server (run/server_share.py) bounds its connections to the databases there: a rota
and a budget per server. At least a quarter of the share stays for workers; while the rest allows one session
connection per database, every database keeps its own (LISTEN, the instance lock, the timers) and nothing here
applies. Beyond that, the databases share `slots` session connections in turns: a database waits for a slot
(first come, first served), connects, resumes its parked instance (or registers), runs its timers (the poll,
schedules, recovery) and whatever is ready; while others wait, the database that has been idle the longest
parks its instance and closes its session for the next one. Turns are paced so that each waiting database gets
one about every `visit_every` seconds (parked_visit_sec), and a database with work keeps its slot until it is
idle. A NOTIFY cannot reach a parked database: its jobs wait for its next visit.
"""
from __future__ import annotations

import asyncio
import time
from typing import Protocol

# A visit polls and lets its workers claim before its database may park: idle at least this long.
MIN_IDLE_SEC = 1.0


class Visitor(Protocol):
    def idle_since(self) -> float | None:
        """When the database's workers last had work (time.monotonic()), None while they have some."""


def session_slots(total: int, databases: int) -> int:
    """Session connections of a runner with max_open_conns_total `total` (0: no cap) for `databases`."""
    if not total:
        return databases
    return max(1, min(databases, total - max(1, total // 4)))


class SessionRota:
    """The runner's session slots (slots None: one per database, no turns)."""

    def __init__(self, slots: int | None, visit_every: float):
        self.slots, self.visit_every = slots, visit_every
        self.holders: dict[Visitor, float] = {}  # holder -> when its visit began
        self.waiting: list[tuple[Visitor, asyncio.Event]] = []  # first come, first served
        self._last_turn = float("-inf")

    @property
    def takes_turns(self) -> bool:
        return self.slots is not None

    async def enter(self, visitor: Visitor, stopping: asyncio.Event | None) -> bool:
        """Wait for a slot (at once without turns); False when `stopping` is set first."""
        if self.slots is None:
            return True
        granted = asyncio.Event()
        self.waiting.append((visitor, granted))
        self._grant()
        waits = [asyncio.ensure_future(granted.wait())]
        if stopping is not None:
            waits.append(asyncio.ensure_future(stopping.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            self.leave(visitor)
            raise
        finally:
            for w in waits:
                w.cancel()
            if not granted.is_set():
                self.waiting.remove((visitor, granted))
        return granted.is_set()

    def leave(self, visitor: Visitor) -> None:
        if self.slots is not None and self.holders.pop(visitor, None) is not None:
            self._grant()

    def _grant(self) -> None:
        while self.waiting and len(self.holders) < self.slots:
            visitor, granted = self.waiting.pop(0)
            self.holders[visitor] = time.monotonic()
            granted.set()

    def should_park(self, visitor: Visitor, now: float) -> bool:
        """Is it `visitor`'s turn to park: others wait, the pace allows a turn now, and of the holders idle
        for MIN_IDLE_SEC it is the one idle the longest."""
        if self.slots is None or not self.waiting or visitor not in self.holders:
            return False
        if now - self._last_turn < self.visit_every / len(self.waiting):
            return False
        idle = {h: h.idle_since() for h in self.holders}
        idle = {h: max(since, self.holders[h]) for h, since in idle.items()
                if since is not None and now - max(since, self.holders[h]) >= MIN_IDLE_SEC}
        if not idle or min(idle, key=idle.__getitem__) is not visitor:
            return False
        self._last_turn = now
        return True
