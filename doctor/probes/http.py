"""HTTP settings shared by every probe: credentials, TLS, extra headers, deadlines."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit


@dataclass
class HttpOptions:
    """How to talk to the targets. The API key is held here only; the bundle never stores it."""

    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # --header values (redacted in output)
    verify: bool | str = True  # False for --insecure, a path for --ca-cert
    timeout_s: float = 10.0  # per-call deadline for the non-stream probes

    def request_headers(self) -> dict[str, str]:
        out = dict(self.headers)
        if self.api_key:
            out.setdefault("Authorization", f"Bearer {self.api_key}")
        return out

    def secrets(self) -> list[str]:
        """Literal values the redactor must remove wherever they appear."""
        values = list(self.headers.values())
        if self.api_key:
            values.append(self.api_key)
        return values


def join_url(base: str, path: str) -> str:
    """``http://h:8000`` or ``http://h:8000/v1`` + ``/v1/models`` -> ``http://h:8000/v1/models``.

    A trailing ``/v1`` is the OpenAI API prefix, not the server root: vLLM serves ``/version``,
    ``/health`` and ``/metrics`` beside it, so ``http://h:8000/v1`` + ``/health`` is ``http://h:8000/health``.
    """
    parts = urlsplit(base)
    root = parts.path.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, root + path, "", ""))
