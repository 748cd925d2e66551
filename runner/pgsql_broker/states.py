"""Named job states: broker_jobs.complete_status."""
from __future__ import annotations

from enum import IntEnum


class JobState(IntEnum):
    PENDING = 0
    RUNNING = 1
    COMPLETED = 2
    FAILED = 3
    CANCELLED = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> "JobState":
        """A state by name (any case) or number; ValueError otherwise."""
        key = text.strip()
        if key.isdigit():
            return cls(int(key))
        try:
            return cls[key.upper()]
        except KeyError:
            raise ValueError(text) from None
