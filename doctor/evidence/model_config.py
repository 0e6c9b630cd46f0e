"""Model-config evidence: the ``config.json`` the user points at (``--model-dir``), kept as text.

Kept raw so that the sizing arithmetic (``doctor.sizing``) re-reads it at analysis time, as the
log's lines are: a newer llm-doctor sizes an old bundle with what it knows then.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ModelConfigEvidence:
    """The ``model_config`` kind: the served model's ``config.json`` as text, which the ``sizing``
    view turns into parameters, weights and KV bytes per token."""

    source: str  # the config.json path as given
    text: str  # its content, unparsed
