"""The application's own route on the gateway path: ``--gateway-route 'POST /chat?prompt={prompt}'``.

Why: the edge an application calls is often not an OpenAI route at all (the vLLM playbook's
FastAPI wrapper takes the prompt as a query parameter), and probing ``/v1/chat/completions``
through it measures a 404. The direct path keeps the engine's route and body, the gateway path
sends the application's request with the same prompt and output length, so the pair still
compares like with like.

Placeholders, replaced literally (other braces, such as a JSON body's, stay as they are):
``{prompt}`` (URL-encoded in the path or query, JSON-escaped in a JSON body) and
``{max_tokens}``. A body template (``--gateway-payload FILE``) that starts like JSON (``{"``, ``[``) must parse
as JSON once the placeholders are filled and is sent as JSON; any other is raw text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from doctor.probes.http import join_url

METHODS = ("POST", "GET", "PUT", "PATCH")
PLACEHOLDERS = ("{prompt}", "{max_tokens}")

_SAMPLE_PROMPT = 'Request 0: the "quick" fox\n'


@dataclass(frozen=True)
class GatewayRoute:
    """A parsed ``--gateway-route`` and its optional body template."""

    method: str
    target: str  # "/chat?prompt={prompt}"
    body: str | None = None  # the --gateway-payload template text
    body_json: bool = False

    @property
    def spec(self) -> str:
        """How the route was given, for the bundle and the report."""
        return f"{self.method} {self.target}"

    def url(self, base: str, prompt: str, max_tokens: int) -> str:
        """The request URL on ``base`` with the placeholders filled (URL-encoded)."""
        path, sep, query = self.target.partition("?")
        filled = [_fill(part, quote(prompt, safe=""), max_tokens) for part in (path, query)]
        return join_url(base, filled[0]) + (sep + filled[1] if sep else "")

    def content(self, prompt: str, max_tokens: int) -> tuple[bytes | None, str | None]:
        """(body, content type) with the placeholders filled; (None, None) without a body template."""
        if self.body is None:
            return None, None
        if self.body_json:
            return _fill(self.body, json.dumps(prompt)[1:-1], max_tokens).encode(), "application/json"
        return _fill(self.body, prompt, max_tokens).encode(), "text/plain; charset=utf-8"


def _fill(template: str, prompt: str, max_tokens: int) -> str:
    return template.replace("{prompt}", prompt).replace("{max_tokens}", str(max_tokens))


def parse_route(spec: str, body: str | None = None) -> GatewayRoute:
    """``'POST /chat?prompt={prompt}'`` (method optional, POST by default) -> ``GatewayRoute``; ValueError says what is wrong."""
    parts = spec.strip().split(None, 1)
    if not parts:
        raise ValueError("--gateway-route is empty; expected e.g. 'POST /chat?prompt={prompt}'")
    method, target = ("POST", parts[0]) if len(parts) == 1 else (parts[0].upper(), parts[1].strip())
    if method not in METHODS:
        raise ValueError(f"--gateway-route method must be one of {', '.join(METHODS)}, got {parts[0]!r}")
    if not target.startswith("/") or any(c.isspace() for c in target):
        raise ValueError(f"--gateway-route needs a path starting with '/' and no spaces, got {target!r}")
    if body is not None and method == "GET":
        raise ValueError("--gateway-payload needs a method that sends a body (POST, PUT or PATCH), not GET")
    body_json = False
    head = body.lstrip() if body is not None else ""
    if body is not None and head[:1] in ("{", "[") and not head.startswith(PLACEHOLDERS):  # "{prompt}" alone is a raw text body
        sample = _fill(body, json.dumps(_SAMPLE_PROMPT)[1:-1], 64)
        try:
            json.loads(sample)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"--gateway-payload looks like JSON but is not once its placeholders are filled: {exc}") from None
        body_json = True
    if "{prompt}" not in target and (body is None or "{prompt}" not in body):
        raise ValueError("--gateway-route (or --gateway-payload) must hold {prompt}: the gateway needs the probe's prompt")
    return GatewayRoute(method=method, target=target, body=body, body_json=body_json)


def read_payload(path: str) -> str:
    """The text of a ``--gateway-payload`` file; OSError/UnicodeDecodeError for the caller to phrase."""
    return Path(path).read_text(encoding="utf-8")


@dataclass(frozen=True)
class EdgeSettings:
    """The gateway path's own route, body template, framing and kind, checked before anything is sent."""

    route: GatewayRoute | None = None
    payload_source: str | None = None
    framing: str | None = None
    text_field: str | None = None
    kind: str | None = None


def edge_settings(route: str | None, payload: str | None, framing: str | None, text_field: str | None,
                  kind: str | None, *, framings: tuple[str, ...]) -> EdgeSettings:
    """``--gateway-route``/``--gateway-payload``/``--framing``/``--text-field``/``--gateway-kind`` as given; ValueError says what is wrong.

    ``framings``: the names ``--framing`` accepts (``doctor.evidence.stream.FRAMINGS``).
    """
    if payload is not None and route is None:
        raise ValueError("--gateway-payload needs --gateway-route: the body template belongs to the application's route")
    body = None
    if payload is not None:
        try:
            body = read_payload(payload)
        except OSError as exc:
            raise ValueError(f"cannot read --gateway-payload {payload}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ValueError(f"--gateway-payload {payload} is not UTF-8 text") from None
    parsed = parse_route(route, body) if route is not None else None
    if framing is not None and framing not in framings:
        raise ValueError(f"--framing must be one of {', '.join(framings)}, got {framing!r}")
    if text_field is not None and (not text_field.strip() or any(not part for part in text_field.split("."))):
        raise ValueError(f"--text-field must be a dotted path such as message.content, got {text_field!r}")
    return EdgeSettings(route=parsed, payload_source=payload, framing=framing, text_field=text_field,
                        kind=kind.strip().lower() if kind and kind.strip() else None)


def impossible_without_engine() -> str:
    """What a run with only ``--gateway`` on the application's own route cannot tell, said plainly."""
    return ("only --gateway on the application's own route: without --engine there is no direct path to compare, "
            "so what the gateway adds (buffering, compression, serialisation, a per-request delay, re-framing, "
            "held headers) cannot be separated from the engine's own latency")
