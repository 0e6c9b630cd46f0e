"""The model-config probe: read a checkpoint's ``config.json`` (never a download).

A missing, unreadable, oversized or unparseable config gives no evidence and a fatal
``EvidenceError`` that says which; the checks that need it then report missing evidence.
"""

from __future__ import annotations

from doctor.evidence.errors import EvidenceError
from doctor.evidence.model_config import ModelConfigEvidence
from doctor.sizing.architecture import ConfigError, config_path, load_config_text, parse_architecture

MAX_BYTES = 4 << 20  # a config.json is a few KiB; anything this large is not one


def read_model_config(model: str) -> tuple[ModelConfigEvidence | None, list[EvidenceError]]:
    path = config_path(model)
    try:
        if path.is_file() and path.stat().st_size > MAX_BYTES:
            raise ConfigError(f"{path} is {path.stat().st_size:,} bytes: not a model config")
        _, text = load_config_text(model)
        parse_architecture(text, str(path))
    except ConfigError as exc:
        kind = "malformed" if path.is_file() else "unreadable"
        return None, [EvidenceError("model_config", str(path), "read the model config", kind, str(exc), fatal=True)]
    except OSError as exc:
        return None, [EvidenceError("model_config", str(path), "read the model config", "unreadable", str(exc), fatal=True)]
    return ModelConfigEvidence(source=str(path), text=text), []
