"""What an engine says about itself over HTTP: llama.cpp ``/props``, SGLang ``/get_server_info``,
TGI ``/info``; the fields kept from each answer and the neutral facts they give.

A startup log is often not at hand when the engine answers, and each of these engines states
its limits in one cheap GET (vLLM has no such route: its ``/v1/models`` gives ``max_model_len``).
Field names from the engines' source:

- llama.cpp ``tools/server`` ``get_props``: ``total_slots`` (``-np``), ``default_generation_settings``
  ``.n_ctx`` (the context of one slot, already divided), ``build_info`` (``b4351-0e70ba68``),
  ``model_alias`` / ``model_path``; the 2024 server put ``n_ctx`` and ``model`` directly in
  ``default_generation_settings``, as it still does for ``n_ctx``;
- SGLang ``python/sglang/srt/entrypoints/http_server.py`` ``get_server_info``: every
  ``ServerArgs`` field (``max_running_requests``, ``chunked_prefill_size``, ``context_length``,
  ``model_path``), the scheduler's ``max_total_num_tokens`` and the ``version``; the
  ``internal_states`` of each data-parallel scheduler give ``memory_usage.token_capacity`` and
  ``max_running_requests``, preferred to the top-level argument; both may still be the command
  line's value where the scheduler capped it lower (sgl-project/sglang#38846: a hybrid model's
  log said "capped to 9" while ``/get_server_info`` said 32), which is why the log wins;
- TGI ``router/src/lib.rs`` ``Info``: ``max_concurrent_requests``, ``max_total_tokens``,
  ``version``, ``model_id``, and up to 2.2.0 ``max_batch_total_tokens`` (the KV budget) and
  ``max_batch_prefill_tokens``; 2.3.0 dropped both from the answer.

The probe keeps only the fields named here (``KEPT``): SGLang's answer repeats every server
argument, secrets included, and llama.cpp's carries the chat template. The facts are read at
analysis time from what was kept, like every other raw input.
"""

from __future__ import annotations

from typing import Any

from doctor.engines.names import LLAMACPP, SGLANG, TGI

#: The route each engine describes itself on, tried in this order when the engine is not known.
PATHS: dict[str, str] = {LLAMACPP: "/props", SGLANG: "/get_server_info", TGI: "/info"}

#: Top-level fields kept from each engine's answer.
KEPT: dict[str, frozenset[str]] = {
    LLAMACPP: frozenset({"total_slots", "default_generation_settings", "build_info", "model_alias", "model_path"}),
    SGLANG: frozenset({"version", "max_total_num_tokens", "max_running_requests", "chunked_prefill_size",
                       "context_length", "model_path", "page_size", "internal_states"}),
    TGI: frozenset({"version", "model_id", "max_concurrent_requests", "max_total_tokens", "max_input_tokens",
                    "max_input_length", "max_batch_total_tokens", "max_batch_prefill_tokens", "router"}),
}

#: Fields kept from each of SGLang's ``internal_states`` (the rest repeats the server arguments).
_SGLANG_STATE = frozenset({"max_running_requests", "memory_usage"})


def kept_fields(engine: str, doc: Any) -> dict[str, Any] | None:
    """The fields of ``engine``'s answer that the facts are read from; ``None`` when the answer
    is not that engine's (not a JSON object, or none of its fields)."""
    if not isinstance(doc, dict):
        return None
    kept = {k: v for k, v in doc.items() if k in KEPT[engine]}
    states = kept.get("internal_states")
    if isinstance(states, list):
        kept["internal_states"] = [{k: v for k, v in s.items() if k in _SGLANG_STATE}
                                   for s in states if isinstance(s, dict)]
    elif "internal_states" in kept:
        del kept["internal_states"]
    if engine == TGI and kept.get("router") not in (None, "text-generation-router"):
        return None  # another server's /info
    return kept if set(kept) - {"version", "model_path"} else None


def facts(engine: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The neutral facts (``doctor.engines.normal``'s names: ``kv_cache_tokens``,
    ``max_running_requests``, ``max_model_len``, ``max_batch_tokens``, ``version``, and ``model``)
    that ``engine``'s kept answer states; a fact it does not state is absent."""
    reader = {LLAMACPP: _llamacpp, SGLANG: _sglang, TGI: _tgi}[engine]
    return {k: v for k, v in reader(fields).items() if v is not None}


def _llamacpp(doc: dict[str, Any]) -> dict[str, Any]:
    settings = doc.get("default_generation_settings")
    settings = settings if isinstance(settings, dict) else {}
    build = _text(doc.get("build_info"))  # "b4351-0e70ba68"; "b0-unknown" when built outside git
    model = _text(doc.get("model_alias")) or _text(doc.get("model_path")) or _text(settings.get("model"))
    return {
        "version": build.split("-", 1)[0] if build and not build.startswith("b0-") else None,
        "max_running_requests": _count(doc.get("total_slots")),
        "max_model_len": _count(settings.get("n_ctx")),
        "model": model,
    }


def _sglang(doc: dict[str, Any]) -> dict[str, Any]:
    states = [s for s in doc.get("internal_states") or () if isinstance(s, dict)]
    resolved = [n for s in states if (n := _count(s.get("max_running_requests"))) is not None]
    capacity = [n for s in states if isinstance(s.get("memory_usage"), dict)
                and (n := _count(s["memory_usage"].get("token_capacity"))) is not None]
    return {
        "version": _text(doc.get("version")),
        "kv_cache_tokens": _count(doc.get("max_total_num_tokens")) or (capacity[0] if capacity else None),
        "max_running_requests": resolved[0] if resolved else _count(doc.get("max_running_requests")),
        "max_model_len": _count(doc.get("context_length")),
        "max_batch_tokens": _count(doc.get("chunked_prefill_size")),  # -1: chunked prefill off
        "model": _text(doc.get("model_path")),
    }


def _tgi(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": _text(doc.get("version")),
        "kv_cache_tokens": _count(doc.get("max_batch_total_tokens")),
        "max_running_requests": _count(doc.get("max_concurrent_requests")),
        "max_model_len": _count(doc.get("max_total_tokens")),
        "max_batch_tokens": _count(doc.get("max_batch_prefill_tokens")),
        "model": _text(doc.get("model_id")),
    }


def _count(value: Any) -> int | None:
    """A positive integer setting; anything else (``null``: automatic, ``-1``: off) is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


#: llama-server's ``/slots`` (``tools/server`` ``server_slot::to_json``): per slot its context
#: (``n_ctx``, cells), whether it serves a request, and ``n_prompt_tokens``, the tokens its KV
#: cells hold (``prompt.tokens``, which grows with every decoded token: a real server's busy slot
#: said 553 = 402 prompt tokens processed + 151 decoded). The prompt and generated text some
#: builds add are never kept: they are the users' requests.
SLOTS_PATH = "/slots"
_SLOT_FIELDS = ("id", "n_ctx", "is_processing", "n_prompt_tokens", "n_prompt_tokens_processed")


def slot_fields(doc: Any) -> list[dict[str, Any]] | None:
    """Per slot the fields KV occupancy is read from (``n_decoded`` lifted out of ``next_token``);
    ``None`` when the answer is not a list of llama-server slots."""
    if not isinstance(doc, list) or not doc or not all(isinstance(s, dict) and "n_ctx" in s for s in doc):
        return None
    out = []
    for slot in doc:
        kept = {k: slot[k] for k in _SLOT_FIELDS if k in slot}
        nxt = slot.get("next_token")
        first = nxt[0] if isinstance(nxt, list) and nxt else nxt
        if isinstance(first, dict) and "n_decoded" in first:
            kept["n_decoded"] = first["n_decoded"]
        out.append(kept)
    return out


def slots_kv_usage(slots: list[dict[str, Any]]) -> float | None:
    """The share of llama-server's KV cells its busy slots hold (their ``n_prompt_tokens`` over
    every slot's ``n_ctx``), 0-1, what vLLM's ``kv_cache_usage_perc`` is; an idle slot's cached
    prompt is reusable, not in use. ``None`` when the slots state no context."""
    cells = sum(n for s in slots if (n := _count(s.get("n_ctx"))) is not None)
    if not cells:
        return None
    used = sum(_count(s.get("n_prompt_tokens")) or 0 for s in slots if s.get("is_processing") is True)
    return 1.0 if used >= cells else used / cells  # never a quotient of two huge counts
