"""Process exit statuses, stable for cron jobs and CI gates."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What ``llm-doctor`` returns to the shell.

    HEALTHY      nothing at or above ``--fail-on`` was found.
    SYMPTOM      a finding at or above ``--fail-on`` (the verdict names the symptom).
    NO_DIAGNOSIS no usable evidence, or a usage error (bad flag, unreadable bundle).
    INTERRUPTED  Ctrl-C; a partial report is still written.
    """

    HEALTHY = 0
    SYMPTOM = 1
    NO_DIAGNOSIS = 2
    INTERRUPTED = 130
