"""The per-request join in words, for the terminal and the HTML alike: the slowest requests by hop,
the longest stalls between tokens and the prompts computed meanwhile, and what the clock alignment did.

The renderers read the ``request_hops`` view (``doctor.derive.view_json.view``), never the spans.
"""

from __future__ import annotations

from doctor.derive.request_hops import RequestHops, RequestHopsView
from doctor.foundation.units import fmt_pct, fmt_seconds

#: The slowest requests the terminal explains, one line each (the HTML draws more as waterfalls).
SLOWEST_SHOWN = 3


def slowest_requests(hops: RequestHopsView, n: int = SLOWEST_SHOWN) -> list[RequestHops]:
    """The ``n`` probe requests with the longest client TTFT that the engine's spans explain."""
    rows = [r for r in hops.requests if r.ttft is not None and r.hops]
    return sorted(rows, key=lambda r: -(r.ttft or 0.0))[:n]


def request_line(row: RequestHops, shown: int = 3) -> str:
    """One request's TTFT and its largest hops: "request 18 (direct): TTFT 1.40 s = queue 1.12 s (80 %), ..."."""
    ttft = row.ttft or 0.0
    hops = sorted(row.hops, key=lambda h: -h.seconds)
    parts = [f"{h.name} {fmt_seconds(h.seconds)}" + (f" ({fmt_pct(h.seconds / ttft)})" if ttft > 0 else "")
             for h in hops[:shown]]
    if len(hops) > shown:
        parts.append(f"{fmt_seconds(sum(h.seconds for h in hops[shown:]))} in the rest")
    span = f" [{row.request_id}]" if row.request_id else ""
    return f"request {row.index} ({row.path}): TTFT {fmt_seconds(ttft)} = {', '.join(parts)}{span}"


def alignment_line(hops: RequestHopsView) -> str | None:
    """What the join did to the engine's clock, when it did anything: the offset it found, or its doubt."""
    a = hops.alignment
    if not a.consistent:
        return (f"the engine's span times fit no single clock offset over {a.requests} request(s) (spans of another "
                f"run, or a clock stepped): aligned by {fmt_seconds(a.offset_s)}, the hops are approximate")
    if a.offset_s:
        return f"the engine's clock was {fmt_seconds(abs(a.offset_s))} {'ahead of' if a.offset_s < 0 else 'behind'} the client's; aligned"
    return None


def longest_stalls(hops: RequestHopsView, n: int = SLOWEST_SHOWN) -> list[RequestHops]:
    """The ``n`` probe requests with the longest stall between two tokens during which the engine
    computed other requests' prompts (the join's ``stall.behind``), the longest first."""
    stalled = [(r, stall) for r in hops.requests if (stall := r.stall) is not None and stall.behind]
    return [r for r, _ in sorted(stalled, key=lambda rs: -rs[1].seconds)[:n]]


def stall_line(row: RequestHops) -> str:
    """One request's longest stall and the largest prompt computed during it: "stall 5.08 s in request 4
    (direct) after token 51 (usual gap 37 ms), 100 % of it while the engine computed 3 other prompts, the
    largest: another user's request cmpl-… (1,837 prompt tokens, prefill 5.08 s), over 100 % of it"."""
    stall = row.stall
    if stall is None or not stall.behind:
        return f"no stall in request {row.index} ({row.path}) with a prompt computed meanwhile"
    first = stall.behind[0]
    who = "the probe's own request" if first.probe else "another user's request"
    tokens = f"{first.prompt_tokens:,} prompt tokens, " if first.prompt_tokens is not None else ""
    whose = f"{who} {first.request_id or '(no id)'} ({tokens}prefill {fmt_seconds(first.prefill)})"
    over = first.overlap / stall.seconds if stall.seconds > 0 else 0.0
    computed = whose if stall.prefills == 1 else f"{stall.prefills} other prompts, the largest: {whose}, over {fmt_pct(over)} of it"
    return (f"stall {fmt_seconds(stall.seconds)} in request {row.index} ({row.path}) after token "
            f"{stall.after_token} (usual gap {fmt_seconds(stall.usual)}), {fmt_pct(stall.covered)} of it while "
            f"the engine computed {computed}")
