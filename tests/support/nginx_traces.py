"""Turn the real nginx stream traces (``fixtures/real-vllm/nginx/*.jsonl``) into stream evidence.

Each line of a trace is one streamed request through one nginx configuration (or straight to
vLLM, ``direct``): the send time, the response headers, every token event's arrival and every
socket read with its byte count, all in seconds after that request's send. This module maps
such a line onto ``RequestTrace`` so a fixture bundle carries exactly what the real client saw.

Two simplifications, both stated in every fixture's ``_why``:

- a read's ``events`` counts the token events it completed (the traces do not record the
  role-only and ``[DONE]`` events per read);
- a request is cut at the first read boundary after ``keep_tokens`` token events, to keep
  fixtures small; the timing of what is kept is untouched.
"""

from __future__ import annotations

import json
from pathlib import Path

from doctor.evidence import ReadRecord, RequestTrace, StreamEvidence, TokenEvent
from tests.support.bundles import stream

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "real-vllm" / "nginx"
_SAME_INSTANT = 1e-6  # token times and read times are both rounded to the microsecond


def request_from_record(record: dict, path: str, *, keep_tokens: int) -> RequestTrace:
    """One jsonl record as a ``RequestTrace`` on ``path``, truncated at a read boundary."""
    start = float(record["t_send_abs"])
    token_times = [float(t) for t in record["token_times"]]
    reads: list[ReadRecord] = []
    kept: list[float] = []
    cursor = 0
    for t, nbytes in zip(record["recv_times"], record["recv_sizes"], strict=False):
        events = 0
        while cursor < len(token_times) and token_times[cursor] <= t + _SAME_INSTANT:
            kept.append(token_times[cursor])
            cursor += 1
            events += 1
        reads.append(ReadRecord(t=round(start + t, 6), nbytes=int(nbytes), events=events))
        if len(kept) >= keep_tokens:
            break
    usage = record.get("usage") or {}
    req = RequestTrace(
        index=int(record["idx"]),
        path=path,
        t_scheduled=start,
        t_sent=start,
        connection_reused=False,
        t_headers=round(start + float(record["t_headers"]), 6),
        status=int(record["status"]),
        http_version="HTTP/1.1",
        headers=dict(record["resp_headers"]),
        tokens=[TokenEvent(t=round(start + t, 6)) for t in kept],
        reads=reads,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=len(kept),
        finish_reason="length",
    )
    if kept:
        req.t_first_byte = req.t_first_event = req.t_first_token = req.tokens[0].t
        req.t_last_token = req.tokens[-1].t
        req.t_end = reads[-1].t
    return req


def load(case: str, route: str, path: str, *, keep_tokens: int = 40) -> list[RequestTrace]:
    """Every request of ``<case>.<route>.jsonl`` as traces on ``path``."""
    lines = (TRACES / f"{case}.{route}.jsonl").read_text().splitlines()
    return [
        request_from_record(json.loads(line), path, keep_tokens=keep_tokens) for line in lines if line.strip()
    ]


def direct_vs(
    case: str, route: str = "chat", *, keep_tokens: int = 40, gateway_keep_tokens: int | None = None
) -> StreamEvidence:
    """The ``direct`` trace as the direct path and ``case`` as the gateway path of one probe.

    The two traces were recorded one after the other against the same vLLM and prompt, so
    they stand for the two paths of one probe run; the gateway requests are shifted to start
    after the direct ones, as the probe sends them.
    """
    direct = load("direct", route, "direct", keep_tokens=keep_tokens)
    gateway = load(case, route, "gateway", keep_tokens=gateway_keep_tokens or keep_tokens)
    offset = max(r.t_end or r.t_scheduled for r in direct) + 0.5
    for req in gateway:
        _shift(req, offset)
        req.index += len(direct)
    paths = {"direct": "http://127.0.0.1:8000", "gateway": "http://127.0.0.1:8080"}
    ev = stream(direct + gateway, route=route, paths=paths)
    ev.shape.prompt_tokens = 32
    ev.shape.max_tokens = 200
    return ev


def _shift(req: RequestTrace, offset: float) -> None:
    for name in (
        "t_scheduled",
        "t_sent",
        "t_headers",
        "t_first_byte",
        "t_first_event",
        "t_first_token",
        "t_last_token",
        "t_end",
    ):
        value = getattr(req, name)
        if value is not None:
            setattr(req, name, round(value + offset, 6))
    for tok in req.tokens:
        tok.t = round(tok.t + offset, 6)
    for read in req.reads:
        read.t = round(read.t + offset, 6)
