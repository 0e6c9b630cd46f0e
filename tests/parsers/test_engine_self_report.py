"""What an engine says about itself (llama.cpp ``/props``, SGLang ``/get_server_info``, TGI ``/info``).

The answers under ``fixtures/engines/server-info/`` are a real llama-server's, captured from the
build the llama.cpp stage runs, and SGLang's and TGI's in the shape their source writes
(PROVENANCE.md); the facts they give are compared with what each answer states, and carried into
the run record and the engine's flag names where no startup log is given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doctor.checklib import engine_of, engine_setting
from doctor.collection.collector import CollectConfig
from doctor.collection.run_record import complete_run_record
from doctor.engines import server_info
from doctor.engines.names import UNKNOWN
from doctor.evidence import Endpoint, EndpointsEvidence, EngineInfo, ModelInfo
from tests.support.bundles import bundle, log

SERVER_INFO = Path(__file__).resolve().parents[2] / "fixtures" / "engines" / "server-info"
#: A real llama-server's answers (PROVENANCE.md): its /props, and /slots and /metrics while both slots were busy.
LLAMACPP_PROPS = "llamacpp-pypi0.3.36-props-np2-tiny.json"
LLAMACPP_SLOTS_BUSY = "llamacpp-pypi0.3.36-slots-busy-np2-tiny.json"
LLAMACPP_METRICS_BUSY = "llamacpp-pypi0.3.36-metrics-busy-np2-tiny.prom"


def _kept(engine: str, name: str) -> dict[str, Any]:
    fields = server_info.kept_fields(engine, json.loads((SERVER_INFO / name).read_text()))
    assert fields is not None
    return fields


#: (engine, file) -> the neutral facts it states, read off the answer by eye.
FACTS = {
    ("llama.cpp", LLAMACPP_PROPS): {"max_running_requests": 2, "max_model_len": 1024, "model": "tiny"},
    ("sglang", "sglang-0.5.4.post3-get_server_info-source-shape.json"): {
        "version": "0.5.4.post3", "kv_cache_tokens": 421472, "max_running_requests": 48, "max_model_len": 40960,
        "max_batch_tokens": 8192, "model": "Qwen/Qwen3-8B"},
    ("tgi", "tgi-2.2.0-info-source-shape.json"): {
        "version": "2.2.0", "kv_cache_tokens": 16000, "max_running_requests": 128, "max_model_len": 8192,
        "model": "meta-llama/Llama-2-13b-chat-hf"},
    # 2.3.0 dropped max_batch_total_tokens from /info: the KV budget is then the log's alone.
    ("tgi", "tgi-3.3.7-info-source-shape.json"): {
        "version": "3.3.7", "max_running_requests": 128, "max_model_len": 8192,
        "model": "meta-llama/Llama-3.1-8B-Instruct"},
}


@pytest.mark.parametrize(("key", "expected"), FACTS.items(), ids=[name for _, name in FACTS])
def test_each_answer_gives_the_neutral_facts_it_states(key: tuple[str, str], expected: dict[str, Any]) -> None:
    engine, name = key
    facts = server_info.facts(engine, _kept(engine, name))
    assert facts == expected


def test_a_llama_server_build_number_is_its_version_unless_it_was_built_outside_git() -> None:
    assert server_info.facts("llama.cpp", {"build_info": "b4351-0e70ba68"})["version"] == "b4351"
    assert "version" not in server_info.facts("llama.cpp", _kept("llama.cpp", LLAMACPP_PROPS))  # "b0-unknown"


def test_only_the_fields_read_are_kept_secrets_and_templates_are_not() -> None:
    kept = _kept("sglang", "sglang-0.5.4.post3-get_server_info-source-shape.json")
    assert "api_key" not in kept and all("api_key" not in s for s in kept["internal_states"])
    assert "chat_template" not in _kept("llama.cpp", LLAMACPP_PROPS)


@pytest.mark.parametrize("doc", [[], "props", {"detail": "Not Found"}, {"router": "my-router", "max_total_tokens": 8}])
def test_an_answer_that_is_not_the_engines_keeps_nothing(doc: object) -> None:
    assert server_info.kept_fields("tgi", doc) is None


@pytest.mark.parametrize("value", [None, -1, 0, True, "48", 4.5])
def test_a_limit_that_is_automatic_or_off_is_not_a_fact(value: object) -> None:
    assert "max_running_requests" not in server_info.facts("sglang", {"max_running_requests": value})


def _llama_endpoints() -> EndpointsEvidence:
    info = EngineInfo(engine="llama.cpp", path="/props", fields=_kept("llama.cpp", LLAMACPP_PROPS))
    return EndpointsEvidence([Endpoint(role="engine", url="http://127.0.0.1:8080", models=[ModelInfo(id="tiny")],
                                       engine_info=info)])


def test_the_run_record_takes_the_limits_the_engine_states_and_the_log_wins() -> None:
    b = bundle(endpoints=_llama_endpoints())
    complete_run_record(b, CollectConfig(engine="http://127.0.0.1:8080"))
    assert (b.run.engine_config["max_num_seqs"], b.run.engine_config["max_model_len"]) == (2, 1024)
    assert engine_setting("max_num_seqs", None, b.run).source == "run record: engine_config"

    stated = bundle(endpoints=_llama_endpoints(), log=log(["srv          init: initializing slots, n_slots = 4"]))
    complete_run_record(stated, CollectConfig(engine="http://127.0.0.1:8080"))
    assert stated.run.engine_config["max_num_seqs"] == 4  # the startup log says what resolved


def test_the_engine_is_known_from_its_answer_when_neither_log_nor_metrics_tell() -> None:
    assert engine_of(None, None, _llama_endpoints()) == "llama.cpp"
    assert engine_of(None, None, EndpointsEvidence([Endpoint(role="engine", url="u")])) == UNKNOWN
