"""What an engine says about itself over HTTP: llama.cpp ``/props``, SGLang ``/get_server_info``,
TGI ``/info``; the fields kept from each answer and the neutral facts they give.

A startup log is often not at hand when the engine answers, and each of these engines states
its limits in one cheap GET (vLLM has no such route: its ``/v1/models`` gives ``max_model_len``).
The route, the fields kept and how they read are each engine's record's ``self_report``
(``doctor.engines.sglang`` ...); field names from the engines' source:

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

from doctor.engines import BY_ID, RECORDS
from doctor.engines.fields import count
from doctor.engines.names import TGI

_REPORTS = sorted(((r.id, r.self_report) for r in RECORDS if r.self_report is not None), key=lambda p: p[1].guess)

#: The route each engine describes itself on, tried in this order when the engine is not known.
PATHS: dict[str, str] = {engine: report.path for engine, report in _REPORTS}

#: Top-level fields kept from each engine's answer.
KEPT: dict[str, frozenset[str]] = {engine: report.kept for engine, report in _REPORTS}

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
    """The neutral facts (``doctor.engine_readers.normal``'s names: ``kv_cache_tokens``,
    ``max_running_requests``, ``max_model_len``, ``max_batch_tokens``, ``version``, and ``model``)
    that ``engine``'s kept answer states (its record's ``SelfReport.read``); a fact it does not
    state is absent."""
    report = BY_ID[engine].self_report
    if report is None:
        raise KeyError(engine)  # an engine that describes itself nowhere
    return {k: v for k, v in report.read(fields).items() if v is not None}


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
    cells = sum(n for s in slots if (n := count(s.get("n_ctx"))) is not None)
    if not cells:
        return None
    used = sum(count(s.get("n_prompt_tokens")) or 0 for s in slots if s.get("is_processing") is True)
    return 1.0 if used >= cells else used / cells  # never a quotient of two huge counts
