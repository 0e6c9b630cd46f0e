"""``llm-doctor size``: the sizing summary (``doctor.sizing.sizing_json``) as a terminal table.

The same numbers as the JSON, in GiB, with vLLM's own wording for the two KV lines ("KV cache
size", "Maximum concurrency ... x"), so a reader can hold the table next to the startup log.
"""

from __future__ import annotations

from rich.console import Console

from doctor.sizing.sizing_json import SizingSummary
from reports.terminal import fitted, grid, printer

GIB = 1 << 30


def _gib(n: float) -> str:
    return f"{n / GIB:,.2f} GiB"


def _count(n: int) -> str:
    return f"{n / 1e9:,.2f} B" if n >= 1e9 else f"{n / 1e6:,.1f} M"


def _tokens(bounds: list[int]) -> str:
    low, high = bounds
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def sizing_rows(doc: SizingSummary) -> list[tuple[str, str]]:
    """Label and value rows: model, weights, KV per token, then capacity and the log when known."""
    fmt = doc["weights_format"]
    rows = [
        ("model", f"{doc['model_type']}, {doc['layers']} layers, {doc['kv_heads']} KV heads x {doc['head_dim']}"),
        ("parameters", _count(doc["params"]) + (f" ({_count(doc['params_active'])} active per token)" if doc["params_active"] != doc["params"] else "")),
        ("weights", f"{_gib(doc['weights_bytes'])} ({fmt['method'] if fmt['method'] != 'none' else fmt['model_dtype']})"),
    ]
    if fmt["kept_16bit"]:
        rows.append((f"kept in {fmt['model_dtype']}", ", ".join(fmt["kept_16bit"])))
    rows.append(("KV per token", f"{doc['kv_bytes_per_token']:,} bytes (kv_cache_dtype {doc['kv_cache_dtype']})"))
    if doc["tp"] > 1:
        rows.append((f"per rank (tp {doc['tp']})", f"weights {_gib(doc['weights_bytes_per_rank'])}, KV {doc['kv_bytes_per_token_per_rank']:,} bytes per token"))
    if "kv_cache_tokens" in doc:
        if doc["kv_cache_memory_bytes"] is not None:
            bound = " (upper bound)" if doc["kv_cache_memory_upper_bound"] else ""
            rows.append(("KV cache memory", f"{_gib(doc['kv_cache_memory_bytes'])} per rank{bound}: {doc['kv_cache_memory_source']}"))
        rows.append(("KV cache size", f"{doc['kv_cache_tokens']:,} tokens ({doc['num_blocks']:,} blocks of {doc['block_size']})"))
        concurrency = f"{doc['max_concurrency']:.2f}x for {doc['max_model_len']:,} tokens per request"
        if doc["max_concurrency"] < 1:
            # vLLM checks at start that one request of max_model_len fits, and raises otherwise
            concurrency += (f": vLLM refuses to start (the KV cache does not hold one such request); the longest "
                            f"it holds is {doc['longest_request_tokens']:,} tokens: lower --max-model-len to that, "
                            "or give the KV cache more memory")
        rows.append(("Maximum concurrency", concurrency))
        if seqs := doc.get("max_num_seqs_at_avg"):
            rows.append((f"max_num_seqs at {seqs['avg_tokens']:,} tokens", f"{seqs['max_num_seqs']:,} (every sequence holds its blocks at once)"))
    if fp8 := doc.get("with_fp8"):
        fp8_seqs = f", max_num_seqs {fp8['max_num_seqs_at_avg']:,}" if fp8["max_num_seqs_at_avg"] is not None else ""
        weights = f"weights {_gib(fp8['weights_bytes_per_rank'])} per rank; needs an evaluation gate"
        rows.append(("with fp8 weights + KV", f"{fp8['kv_cache_tokens']:,} tokens, {fp8['max_concurrency']:.2f}x{fp8_seqs} ({weights})"))
    if log := doc.get("log"):
        verdict = "agrees" if log["agrees"] else "DISAGREES"
        computed = f"{_tokens(log['expected_kv_cache_tokens'])} computed from {log['budget']}"
        rows.append(("log", f"{log['reported_kv_cache_tokens']:,} tokens reported, {computed}: {verdict}"))
        rows += [("explained by", f"{a['setting']} {a['value']} (log: {a['current']})") for a in log["alternatives"]]
    return rows


def print_sizing(doc: SizingSummary, console: Console) -> None:
    out = printer(console)
    table = grid(("", ""), sizing_rows(doc), wrap=(1,))
    table.show_header = False
    out(fitted(table, console))
    for note in doc["notes"]:
        out(f"note: {note}")
    if "left_out" in doc:
        out(f"left out: {doc['left_out']}")
