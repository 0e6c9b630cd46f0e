"""The one exception a derivation raises when its inputs are absent or unusable."""

from __future__ import annotations


class Missing(Exception):
    """Evidence a check needs is absent; the message says which and why."""
