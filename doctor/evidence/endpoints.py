"""What the engine and gateway say about themselves: /version, /v1/models, /health, headers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ModelInfo:
    """One model a server lists at ``/v1/models``: its id, the checkpoint it was loaded from
    (``root``), the context length it serves and who owns it (which engine answered)."""

    id: str
    root: str | None = None
    max_model_len: int | None = None
    owned_by: str | None = None  # "vllm", "sglang", "llamacpp": the server that lists it


@dataclass
class EngineInfo:
    """An engine's answer about itself (llama.cpp ``/props``, SGLang ``/get_server_info``, TGI
    ``/info``): the fields ``doctor.engines.server_info`` reads, as the engine sent them."""

    engine: str  # as doctor.engines.names: "llama.cpp", "sglang", "tgi"
    path: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class Endpoint:
    """What one server (the engine or the gateway in front of it) said about itself: its
    ``/version``, ``/v1/models`` and ``/health`` answers, its HTTP version and the headers that decide
    how a stream is relayed, which gateway checks read to tell a buffering proxy from a streaming one."""

    role: str  # "engine" | "gateway"
    url: str
    version: str | None = None
    models: list[ModelInfo] = field(default_factory=list)
    health_status: int | None = None
    http_version: str | None = None
    # Headers that matter for streaming: Server, Content-Type, Content-Encoding,
    # Transfer-Encoding, X-Accel-Buffering, Via (from a streamed response when there was one).
    headers: dict[str, str] = field(default_factory=dict)
    engine_info: EngineInfo | None = None  # the engine role only
    # The deadline of its first GET, in seconds, and what set it: "timeout" (--timeout), "run-deadline"
    # (what was left of the run's --deadline) or "direct-path" (a gateway held to the bound the engine's
    # own answers set, ``doctor.probes.deadlines.direct_bound``); None in a bundle from before.
    deadline_s: float | None = None
    deadline_basis: str | None = None
    # Seconds a GET waited, its whole --timeout, with the request sent on an accepted connection and not
    # a byte of answer: a hung server (``doctor.probes.http.Unanswered``); None when it answered, or
    # failed otherwise. The stream probe then holds that path's response heads to a short bound.
    unanswered_s: float | None = None
    # The scheme its port speaks when the URL's was the wrong one ("http" for an https:// URL on a
    # plain-HTTP port, "https" for an http:// URL on a TLS port), found at its first failed GET.
    scheme_mismatch: str | None = None


@dataclass
class EndpointsEvidence:
    """The ``endpoints`` kind: one ``Endpoint`` per URL probed, engine first; what identifies
    the engine, the model and the gateway family before any stream is read."""

    endpoints: list[Endpoint] = field(default_factory=list)
