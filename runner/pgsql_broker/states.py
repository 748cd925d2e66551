"""The job states of broker_jobs.complete_status (DESIGN.md; sql/ defines the same numbers). Shared by run/ and
observe/, which must not import run/."""
from __future__ import annotations

from enum import IntEnum


class JobState(IntEnum):
    PENDING = 0    # waiting to be claimed (also after a failed attempt that will be retried)
    RUNNING = 1    # claimed by a runner, its lease not expired
    COMPLETED = 2
    FAILED = 3     # for good: no attempts left
    CANCELLED = 4

    @classmethod
    def finished(cls) -> tuple["JobState", ...]:
        return (cls.COMPLETED, cls.FAILED, cls.CANCELLED)
