"""Credential resolution, as in the original broker: CLI flag -> environment variable ->
masked interactive prompt (only when stdin is a TTY) -> error. Values are never logged."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import click


class MissingCredential(click.UsageError):
    """No flag, no environment variable and no TTY to ask on: a usage error (exit code 2)."""


@dataclass(frozen=True)
class Credential:
    label: str
    flag: str
    env: tuple[str, ...]
    secret: bool = True
    may_be_empty: bool = False  # at the prompt only (e.g. no password with peer/trust auth)

    def resolve(self, flag_value: str | None) -> str:
        if flag_value:
            return flag_value
        for name in self.env:
            value = os.environ.get(name)
            if value:
                return value
        if sys.stdin is not None and sys.stdin.isatty():
            return click.prompt(self.label, hide_input=self.secret, err=True,
                                default="" if self.may_be_empty else None, show_default=False)
        sources = " or ".join([self.flag, *(f"${name}" for name in self.env)])
        raise MissingCredential(f"{self.label} is required: give {sources} (no terminal to ask on)")


ADMIN_USER = Credential("admin user", "--admin-user", ("PGUSER", "PG_USER"), secret=False)
ADMIN_PASSWORD = Credential("admin password", "--admin-password", ("PGPASSWORD", "PG_PASS"), may_be_empty=True)
ROLE_PASSWORDS = {
    "broker_admin": Credential("broker_admin password", "--broker-admin-password", ("BROKER_ADMIN_PASSWORD",)),
    "broker_runtime": Credential("broker_runtime password", "--broker-runtime-password", ("BROKER_RUNTIME_PASSWORD",)),
    "broker_enqueue": Credential("broker_enqueue password", "--broker-enqueue-password", ("BROKER_ENQUEUE_PASSWORD",)),
}
