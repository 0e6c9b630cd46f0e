"""How many tokens each token-bearing SSE event carried (vLLM's ``--stream-interval``, bundling).

Shared by the token-bundling check and the classifier's inter-token decomposition: per-chunk
gaps are per-token gaps only when a chunk carries one token.
"""

from __future__ import annotations

from doctor.derive.stream_stats import token_count
from doctor.evidence import StreamEvidence


def tokens_per_chunk(stream: StreamEvidence) -> tuple[float, int, int, int] | None:
    """(tokens per token-bearing event, tokens, events, requests) over measured answers.

    The usage trailer's completion tokens are exact; without it, the per-event token counts the
    server reported (continuous usage stats). ``None`` when neither was recorded. Each request's
    count is ``token_count``'s, the one TPOT divides by (bounded as it bounds them).
    """
    reqs = [r for r in stream.requests if r.ok and not r.warmup and r.tokens]
    counted = [r for r in reqs if r.completion_tokens is not None] or [r for r in reqs if any(t.tokens != 1 for t in r.tokens)]
    if not counted:
        return None
    tokens = sum(token_count(r) for r in counted)
    chunks = sum(len(r.tokens) for r in counted)
    return tokens / chunks, tokens, chunks, len(counted)
