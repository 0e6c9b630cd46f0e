"""How many tokens each token-bearing SSE event carried (vLLM's ``--stream-interval``, bundling).

Shared by the token-bundling check and the classifier's inter-token decomposition: per-chunk
gaps are per-token gaps only when a chunk carries one token.
"""

from __future__ import annotations

from doctor.evidence import StreamEvidence


def tokens_per_chunk(stream: StreamEvidence) -> tuple[float, int, int, int] | None:
    """(tokens per token-bearing event, tokens, events, requests) over measured answers.

    The usage trailer's completion tokens are exact; without it, the per-event token counts the
    server reported (continuous usage stats). ``None`` when neither was recorded.
    """
    reqs = [r for r in stream.requests if r.ok and not r.warmup and r.tokens]
    with_usage = [r for r in reqs if r.completion_tokens is not None]
    if with_usage:
        tokens = sum(r.completion_tokens or 0 for r in with_usage)
        chunks = sum(len(r.tokens) for r in with_usage)
        return tokens / chunks, tokens, chunks, len(with_usage)
    reported = [r for r in reqs if any(t.tokens != 1 for t in r.tokens)]
    if reported:
        tokens = sum(t.tokens for r in reported for t in r.tokens)
        chunks = sum(len(r.tokens) for r in reported)
        return tokens / chunks, tokens, chunks, len(reported)
    return None
