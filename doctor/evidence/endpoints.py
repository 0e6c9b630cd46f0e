"""What the engine and gateway say about themselves: /version, /v1/models, /health, headers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ModelInfo:
    id: str
    root: str | None = None
    max_model_len: int | None = None


@dataclass
class Endpoint:
    role: str  # "engine" | "gateway"
    url: str
    version: str | None = None
    models: list[ModelInfo] = field(default_factory=list)
    health_status: int | None = None
    http_version: str | None = None
    # Headers that matter for streaming: Server, Content-Type, Content-Encoding,
    # Transfer-Encoding, X-Accel-Buffering, Via (from a streamed response when there was one).
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class EndpointsEvidence:
    endpoints: list[Endpoint] = field(default_factory=list)
