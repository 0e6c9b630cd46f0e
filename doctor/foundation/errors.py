"""Errors that cross module boundaries.

::

    DoctorError                 anything llm-doctor reports to the user without a traceback
     ├─ UsageError              bad flags, config file or --set value       -> exit 2
     └─ BundleError             unreadable or unsupported evidence bundle   -> exit 2
         └─ BundleVersionError  written by a newer llm-doctor

A third-party check that fails to load, or that reuses a taken code or name, is not an error:
``doctor.checking.registry`` turns it into a warning listed in the report.

Probe failures never raise past the collector: they become ``doctor.evidence.EvidenceError``
entries in the bundle, and the checks that needed that evidence report ``missing-evidence``.
"""

from __future__ import annotations


class DoctorError(Exception):
    """Base of every error shown to the user as a one-line message."""


class UsageError(DoctorError):
    """The user asked for something that cannot be done as asked."""


class BundleError(DoctorError):
    """An evidence bundle could not be read."""


class BundleVersionError(BundleError):
    """The bundle's schema_version is newer than this llm-doctor understands."""
