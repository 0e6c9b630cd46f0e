"""Kept log lines -> ``LogFacts``: the facts of the last startup, its errors, the stats series.

Works on the lines the scanner kept (``LogLine(no, text)``) and on nothing else, so that a newer
parser re-reads the lines stored in an old bundle. A log can hold several startups (restarts);
a new one begins when a startup marker (version banner, engine arguments, engine config) comes
after lines that a running engine prints, or, in a paste without markers, when a process that
already loaded its weights and sized its KV cache loads them again. Within a startup the same fact is often printed more
than once (once per worker process, twice for hybrid models): the first statement of the most
direct kind wins, so a resolved value (the engine config, "Using max model len") beats the
command-line argument, which beats an inference.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doctor.evidence.log import LogLine
from doctor.foundation.wire import number
from doctor.vllm_log import patterns as P  # noqa: N812 - P.NAME reads as "the pattern NAME"
from doctor.vllm_log.parsed import Fact, LogFacts, Startup, StartupError, StatsPoint
from doctor.vllm_log.prefixes import Record, iter_records

# How directly a line states a fact; a higher rank replaces a lower one within a startup.
INFERRED, ARGUMENT, CONFIG, STATED = 0, 1, 2, 3

# Startup phases: a marker of phase p opens a new startup when the current one already
# printed something of a later phase.
VERSION_PHASE, ARGS_PHASE, CONFIG_PHASE, LOAD_PHASE, RUNNING_PHASE = 0, 1, 2, 3, 4

#: Engine-argument / engine-config names -> fact names (values converted by ``_value``).
CONFIG_KEYS: dict[str, str] = {
    "model": "model",
    "model_tag": "model",
    "served_model_name": "served_model_name",
    "revision": "revision",
    "dtype": "dtype",
    "max_model_len": "max_model_len",
    "max_seq_len": "max_model_len",  # the engine config's name for it, all releases
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "enforce_eager": "enforce_eager",
    "enable_prefix_caching": "enable_prefix_caching",
    "enable_chunked_prefill": "chunked_prefill",
    "chunked_prefill_enabled": "chunked_prefill",
    "block_size": "block_size",
    "kv_cache_dtype": "kv_cache_dtype",
    "quantization": "quantization",
    "speculative_config": "speculative_config",
    "speculative_model": "speculative_model",
    "num_speculative_tokens": "num_speculative_tokens",
    "stream_interval": "stream_interval",
    "trust_remote_code": "trust_remote_code",
    "load_format": "load_format",
    "port": "port",
    "swap_space": "swap_space",
    "cpu_offload_gb": "cpu_offload_gb",
    "num_gpu_blocks_override": "num_gpu_blocks_override",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "max_seq_len_to_capture": "max_seq_len_to_capture",
    "max_cudagraph_capture_size": "max_cudagraph_capture_size",
    "scheduling_policy": "scheduling_policy",
    "async_scheduling": "async_scheduling",
    "enable_expert_parallel": "enable_expert_parallel",
}

# Argument names whose values are credentials; never kept, even in the non-default-args map.
_SECRET_ARG = re.compile(r"(?:^|_)(?:key|token|secret|password)$", re.IGNORECASE)

_PROFILING_ROWS: dict[str, str] = {
    "total_gpu_memory": "total_gpu_memory_gib",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "the current vLLM instance can use": "usable_memory_gib",
    "model weights take": "weights_memory_gib",
    "non_torch_memory": "non_torch_memory_gib",
    "PyTorch activation peak memory": "activation_peak_gib",
    "available_kv_cache_memory": "kv_cache_memory_gib",
}

_BLOCK_SIZES = (16, 8, 32, 1, 2, 4, 64, 128, 256)  # vLLM's choices, the default first
_V1_PROCESS = re.compile(r"^(?:EngineCore|VllmWorker rank=|Worker_|DPEngineCore)")
_MAX_OTHER_ERRORS = 10
_MAX_ERROR_MESSAGE = 2000  # vLLM's own advice ends its longest messages (about 500 characters): keep it
_DIGITS = re.compile(r"[-+]?\d+")
_KEY_AHEAD = re.compile(r"\w+=(?!=)")  # "key=" after a space separates items printed without a comma


@dataclass
class _StartupState:
    """One startup while its lines are read."""

    first_line: int
    last_line: int
    phase: int = -1
    facts: dict[str, tuple[int, Fact]] = field(default_factory=dict)
    errors: list[StartupError] = field(default_factory=list)
    preemption_warnings: int = 0
    preemptions_cumulative: int | None = None
    serving: bool = False  # a stats line was printed: later exceptions are not startup errors
    loaded_by: set[str | None] = field(default_factory=set)  # process names (no pid) that loaded weights

    def set(self, key: str, value: Any, record: Record, rank: int, note: str | None = None) -> None:
        if value is None or value == "":
            return
        held = self.facts.get(key)
        if held is None or rank > held[0]:
            self.facts[key] = (rank, Fact(value=value, line=record.no, raw=record.raw, note=note))

    def infer(self, key: str, value: Any, source: Fact | None, note: str) -> None:
        """Set ``key`` from other facts, with the provenance of ``source``, if no line states it."""
        if key not in self.facts and source is not None:
            self.facts[key] = (INFERRED, Fact(value=value, line=source.line, raw=source.raw, note=note))

    def fact(self, key: str) -> Fact | None:
        held = self.facts.get(key)
        return None if held is None else held[1]

    def value(self, key: str) -> Any:
        held = self.facts.get(key)
        return None if held is None else held[1].value

    def error(self, kind: str, message: str, record: Record) -> None:
        message = message.strip()[:_MAX_ERROR_MESSAGE]
        if any(e.kind == kind and e.message == message for e in self.errors):
            return
        if kind == "other" and (self.serving or sum(e.kind == "other" for e in self.errors) >= _MAX_OTHER_ERRORS):
            return
        self.errors.append(StartupError(kind=kind, message=message, line=record.no, raw=record.raw))


class _Parser:
    def __init__(self) -> None:
        self.startups: list[_StartupState] = []
        self.stats: list[StatsPoint] = []

    @property
    def current(self) -> _StartupState:
        return self.startups[-1]

    def feed(self, record: Record) -> None:
        if not self.startups:
            self.startups.append(_StartupState(first_line=record.no, last_line=record.no))
        self._dispatch(record, record.message)
        state = self.current  # the startup a marker may just have opened
        state.last_line = record.no
        if record.process and _V1_PROCESS.match(record.process):
            state.set("engine_generation", "V1", record, INFERRED, note=f"process name ({record.process})")
        elif record.process and record.process.startswith("VllmWorkerProcess"):
            state.set("engine_generation", "V0", record, INFERRED, note=f"process name ({record.process})")

    def _dispatch(self, record: Record, message: str) -> None:
        if record.level in (None, "ERROR", "CRITICAL") and self._error(record, message):
            return
        if "throughput:" in message:
            self._stats(record, message)
        elif "hit rate: GPU" in message:
            self._prefix_hit_rate(record, message)
        elif "preempted by" in message:
            self._preemption(record, message)
        elif "LLM engine" in message or "args: " in message or "version" in message or "model config: {" in message:
            self._marker(record, message)
        else:
            self._fact(record, message)

    # -- startup markers --------------------------------------------------------------------

    def _open(self, phase: int, record: Record) -> _StartupState:
        """The startup a marker of ``phase`` belongs to, opening a new one after a running engine."""
        if self.current.phase > phase:
            self.startups.append(_StartupState(first_line=record.no, last_line=record.no))
        state = self.current
        state.phase = max(state.phase, phase)
        return state

    def _reload(self, record: Record) -> _StartupState:
        """The startup a weights-loaded line belongs to: a new one when the same process (by
        name: a restart changes its pid) already loaded and went on to size the cache. Every
        tensor-parallel worker loads before any sizes the cache, so a TP log stays one startup;
        data-parallel engines load on their own, but under names of their own (``EngineCore_DP1``)."""
        process = record.process.split(" pid=")[0] if record.process else None
        if self.current.phase >= RUNNING_PHASE and process in self.current.loaded_by:
            self.startups.append(_StartupState(first_line=record.no, last_line=record.no))
        self.current.loaded_by.add(process)
        return self.current

    def _marker(self, record: Record, message: str) -> None:
        if (match := P.API_VERSION.search(message)) or (match := P.BANNER_VERSION.search(message)):
            self._open(VERSION_PHASE, record).set("vllm_version", match["version"], record, STATED)
        elif match := P.ENGINE_INIT.match(message):
            state = self._open(CONFIG_PHASE, record)
            state.set("vllm_version", match["version"], record, STATED)
            generation = match["generation"]
            if generation is None and record.source:
                generation = "V1" if record.source.startswith("core.py") else "V0"
            state.set("engine_generation", generation, record, STATED if match["generation"] else CONFIG)
            self._config_items(state, split_items(match["config"]), record, CONFIG)
            _nested_config(state, match["config"], record)
        elif match := P.ARGS_NAMESPACE.match(message):
            state = self._open(ARGS_PHASE, record)
            self._config_items(state, split_items(match["body"]), record, ARGUMENT)
        elif match := P.NON_DEFAULT_ARGS.match(message):
            state = self._open(ARGS_PHASE, record)
            args = _dict_literal(match["body"])
            self._config_items(state, list(args.items()), record, ARGUMENT)
            state.set("non_default_args", {k: v for k, v in args.items() if not _SECRET_ARG.search(k)}, record, STATED)
        elif match := P.WRAPPER_CONFIG.search(message):  # a wrapper's arguments for the engine it starts
            state = self._open(ARGS_PHASE, record)
            self._config_items(state, list(_dict_literal(match["body"]).items()), record, ARGUMENT)
        else:
            self._fact(record, message)

    def _config_items(self, state: _StartupState, items: Iterable[tuple[str, Any]], record: Record, rank: int) -> None:
        """Facts from ``key=value`` items: printed text (converted here) or values already parsed."""
        for key, raw in items:
            name = CONFIG_KEYS.get(key)
            if name is None:
                continue
            value = literal_value(raw) if isinstance(raw, str) else raw
            if isinstance(value, (int, float)) and not isinstance(value, bool):  # bounded, as every number read
                value = number(value, int) if isinstance(value, int) else number(value)
            if name == "served_model_name" and isinstance(value, (list, tuple)):
                value = value[0] if value else None
            state.set(name, value, record, rank)

    # -- facts of a running or starting engine ----------------------------------------------

    def _fact(self, record: Record, message: str) -> None:
        state = self.current
        running = RUNNING_PHASE
        if match := P.KV_CACHE_SIZE.match(message):
            state.set("kv_cache_tokens", _int(match["tokens"]), record, STATED)
            state.set("kv_cache_device", _device(match["device"]), record, STATED)
            if match["length"]:
                state.set("max_concurrency", _float(match["x"]), record, STATED)
                state.set("max_concurrency_tokens", _int(match["length"]), record, STATED)
            state.set("engine_generation", "V1", record, INFERRED, note="V1 KV-cache size line")
        elif match := P.CONCURRENCY.match(message):
            state.set("max_concurrency", _float(match["x"]), record, STATED)
            state.set("max_concurrency_tokens", _int(match["length"]), record, STATED)
        elif match := P.BLOCKS.match(message):
            gpu = _int(match["gpu"])
            state.set("num_gpu_blocks", gpu, record, STATED)
            state.set("kv_cache_device", _device(match["device"] or match["bare"]), record, STATED)
            if match["cpu"] is not None:
                state.set("num_cpu_blocks", _int(match["cpu"]), record, STATED)
            # V0 pairs the GPU blocks with CPU (swap) blocks; V1 (0.6.4-0.7.3) printed them alone.
            generation = "V0" if match["cpu"] is not None else "V1"
            state.set("engine_generation", generation, record, INFERRED, note="block-count line format")
            if gpu == 0:
                state.error("no-cache-memory", f"{message}: no memory is left for the KV cache "
                            "(vLLM stops with 'No available memory for the cache blocks')", record)
        elif match := P.OVERRIDE_BLOCKS.match(message):
            state.set("num_gpu_blocks", _int(match["n"]), record, STATED + 1)  # replaces the computed count
            state.set("num_gpu_blocks_computed", _int(match["computed"]), record, STATED)
        elif match := P.CACHE_CONFIG_INFO.match(message):
            state.set("num_gpu_blocks", _int(match["n"]), record, STATED)
        elif match := P.AVAILABLE_KV.match(message) or P.CPU_KV_SET.match(message):
            state.set("kv_cache_memory_gib", _float(match["gib"]), record, STATED)
        elif match := P.WEIGHTS.match(message):
            state = self._reload(record)
            state.set("weights_memory_gib", _float(match["gib"]), record, STATED)
            running = LOAD_PHASE  # every worker prints its own: only sizing the cache ends loading
        elif match := P.PROFILING_TIME.match(message):
            state.set("memory_profiling_s", _float(match["s"]), record, STATED)
        elif match := P.INSTANCE_CAN_USE.match(message):
            state.set("total_gpu_memory_gib", _float(match["total"]), record, STATED)
            state.set("gpu_memory_utilization", _float(match["util"]), record, STATED)
            state.set("usable_memory_gib", _float(match["usable"]), record, STATED)
        elif match := P.PROFILING_BREAKDOWN.match(message):
            state.set("weights_memory_gib", _float(match["weights"]), record, STATED)
            state.set("non_torch_memory_gib", _float(match["non_torch"]), record, STATED)
            state.set("activation_peak_gib", _float(match["activation"]), record, STATED)
            state.set("kv_cache_memory_gib", _float(match["kv"]), record, STATED)
        elif match := P.PROFILING_ROW.match(message):
            state.set(_PROFILING_ROWS[match["key"]], _float(match["value"]), record, STATED)
        elif match := P.PROFILING_064.match(message):
            state.set("total_gpu_memory_gib", _float(match["total"]), record, STATED)
            state.set("kv_cache_memory_gib", _float(match["kv"]), record, STATED)
            state.set("gpu_memory_utilization", _float(match["util"]), record, STATED)
        elif match := P.GRAPH_CAPTURED.match(message):
            state.set("cuda_graph_time_s", _float(match["s"]), record, STATED)
            if match["gib"]:
                state.set("cuda_graph_memory_gib", _float(match["gib"]), record, STATED)
        elif match := P.CAPTURE_CAPPED.match(message):
            state.set("max_cudagraph_capture_size", _int(match["n"]), record, STATED, note=f"capped from {match['was']}")
        elif match := P.GRAPH_POOL.match(message):
            state.set("cuda_graph_memory_gib", _float(match["gib"]), record, STATED)
        elif match := P.GRAPH_ESTIMATE.match(message):
            state.set("cuda_graph_memory_gib", _float(match["gib"]), record, CONFIG, note="estimated before capture")
        elif match := P.GRAPH_PROFILING_ADVICE.search(message):
            state.set("gpu_memory_utilization", _float(match["util"]), record, STATED)
            state.set("gpu_memory_utilization_equivalent", _float(match["equivalent"]), record, STATED)
            if match["suggested"]:
                state.set("gpu_memory_utilization_suggested", _float(match["suggested"]), record, STATED)
        elif match := P.TORCH_COMPILE.match(message):
            state.set("torch_compile_s", _float(match["s"]), record, STATED)
        elif match := P.INIT_ENGINE.match(message):
            state.set("init_engine_s", _float(match["s"]), record, STATED)
        else:
            running = CONFIG_PHASE
            if match := P.MAX_MODEL_LEN.match(message):
                state.set("max_model_len", _int(match["n"]), record, STATED)
            elif match := P.CHUNKED_PREFILL.match(message):
                state.set("chunked_prefill", True, record, STATED)
                state.set("max_num_batched_tokens", _int(match["n"]), record, STATED)
            elif P.CHUNKED_PREFILL_DEFAULT.match(message):
                state.set("chunked_prefill", True, record, STATED)
            elif P.EAGER_MODE.match(message):
                state.set("enforce_eager", True, record, ARGUMENT, note="implied: CUDA graphs disabled under eager mode")
            elif match := P.BANNER_MODEL.search(message):
                state.set("model", match["model"], record, ARGUMENT)
                running = VERSION_PHASE  # the banner's second line
            else:
                return
        state.phase = max(state.phase, running)

    # -- errors, stats, preemption ----------------------------------------------------------

    def _error(self, record: Record, message: str) -> bool:
        state = self.current
        if P.NO_CACHE_MEMORY.search(message):
            state.error("no-cache-memory", message, record)
        elif match := P.V1_LEN_EXCEEDS_KV.search(message):
            state.error("max-len-exceeds-kv", message, record)
            state.set("max_model_len", _int(match["length"]), record, INFERRED, note="from the startup error")
            state.set("kv_cache_memory_gib", _float(match["available"]), record, INFERRED, note="from the startup error")
            state.set("kv_cache_needed_gib", _float(match["needed"]), record, STATED)
            if match["estimate"]:
                state.set("estimated_max_model_len", _int(match["estimate"]), record, STATED)
        elif match := P.V0_LEN_EXCEEDS_KV.search(message):
            state.error("max-len-exceeds-kv", message, record)
            state.set("max_model_len", _int(match["length"]), record, INFERRED, note="from the startup error")
            state.set("kv_cache_tokens", _int(match["capacity"]), record, INFERRED, note="from the startup error")
        elif match := P.FREE_MEMORY_BELOW.search(message):
            state.error("memory-below-utilisation", message, record)
            state.set("gpu_memory_utilization", _float(match["util"]), record, ARGUMENT)
            state.set("free_memory_gib", _float(match["free"]), record, STATED)
            state.set("total_gpu_memory_gib", _float(match["total"]), record, STATED)
        elif P.OUT_OF_MEMORY.search(message):
            state.error("oom", message, record)
        elif P.OTHER_ERROR.search(message):
            state.error("other", message, record)
        else:
            return False
        state.phase = RUNNING_PHASE
        return True

    def _stats(self, record: Record, message: str) -> None:
        match = P.STATS.search(message)
        if match is None:
            return
        point = StatsPoint(
            line=record.no,
            timestamp=record.timestamp,
            prompt_throughput=_float(match["prompt"]),
            generation_throughput=_float(match["generation"]),
            engine=match["engine"] or match["aggregated"],
            startup=len(self.startups) - 1,
        )
        usages: list[tuple[str, float]] = []
        for part in P.STATS_PART.finditer(message, match.end()):
            if part["queue"]:
                setattr(point, part["queue"].lower(), _float(part["reqs"]))
            elif part["preemptions"]:
                point.preemptions = _float(part["preemptions"])
            elif part["device"]:
                if (usage := _float(part["usage"])) is not None:
                    usages.append((part["device"], usage))
            else:
                point.prefix_cache_hit_pct = _float(part["hit"])
        v0 = point.pending is not None or point.swapped is not None
        if v0:
            point.waiting = point.pending  # V0 printed its waiting queue as "Pending"
            point.kv_usage_pct = next((u for d, u in usages if d == "GPU"), None)
            point.cpu_kv_usage_pct = next((u for d, u in usages if d == "CPU"), None)
        elif usages:
            point.kv_usage_pct = usages[0][1]
        self.stats.append(point)
        state = self.current
        state.set("engine_generation", "V0" if v0 else "V1", record, INFERRED, note="stats line format")
        state.phase = RUNNING_PHASE
        state.serving = True

    def _preemption(self, record: Record, message: str) -> None:
        match = P.PREEMPTION.search(message)
        if match is None:
            return
        state = self.current
        state.preemption_warnings += 1
        state.set("preemption_mode", match["mode"], record, STATED)
        if match["total"] and (total := _int(match["total"])) is not None:
            state.preemptions_cumulative = max(total, state.preemptions_cumulative or 0)
        state.set("engine_generation", "V0", record, INFERRED, note="V0 preemption warning")
        state.phase = RUNNING_PHASE

    def _prefix_hit_rate(self, record: Record, message: str) -> None:
        """Attach V0's separate "Prefix cache hit rate: GPU: x%" line to the stats line before it."""
        match = P.V0_PREFIX_HIT.search(message)
        if match and self.stats and record.no - self.stats[-1].line <= 2:
            self.stats[-1].prefix_cache_hit_pct = _float(match["gpu"])

    # -- result -----------------------------------------------------------------------------

    def result(self, source: str) -> LogFacts:
        startups = [_finish(state) for state in self.startups]
        facts = LogFacts(source=source, stats=self.stats, startups=startups)
        if self.startups:
            last = self.startups[-1]
            facts.facts = {key: fact for key, (_rank, fact) in sorted(last.facts.items())}
            facts.errors = _specific_errors(last.errors)
            facts.preemption_warnings = last.preemption_warnings
            facts.preemptions_cumulative = last.preemptions_cumulative
        return facts


def parse_lines(lines: Iterable[LogLine], source: str = "") -> LogFacts:
    """Parse kept log lines (in file order) into the facts of the last startup and the series."""
    parser = _Parser()
    for record in iter_records((line.no, line.text) for line in lines):
        if record.message:
            parser.feed(record)
    return parser.result(source)


def _finish(state: _StartupState) -> Startup:
    """Complete a startup's facts with what follows from them, and summarise it."""
    _infer(state)
    state.errors = _specific_errors(state.errors)
    return Startup(
        first_line=state.first_line,
        last_line=state.last_line,
        version=state.value("vllm_version"),
        engine_generation=state.value("engine_generation"),
        model=state.value("model"),
        errors=[e.kind for e in state.errors],
    )


#: ``num_spec_tokens=3`` in the engine config's ``SpeculativeConfig(...)`` repr (0.6-0.33), or
#: ``'num_speculative_tokens': 3`` in the ``--speculative-config`` dict of the non-default args.
_SPEC_TOKENS = re.compile(r"num_spec(?:ulative)?_tokens['\"]?\s*[:=]\s*(\d+)")


def _infer(state: _StartupState) -> None:
    """Add the facts that follow from others of the same startup, each with a note saying how."""
    blocks, concurrency = state.fact("num_gpu_blocks"), state.fact("max_concurrency")
    length, tokens = state.value("max_concurrency_tokens"), state.value("kv_cache_tokens")
    if blocks and blocks.value and state.value("block_size") is None:
        size = None
        if tokens and tokens % blocks.value == 0:
            size, why, source = tokens // blocks.value, f"{tokens} KV tokens / {blocks.value} blocks", blocks
        elif concurrency and length:
            # V0 and early V1 print concurrency = blocks x block_size / max_model_len, 2 decimals.
            x = concurrency.value
            size = next((s for s in _BLOCK_SIZES if round(blocks.value * s / length, 2) == round(x, 2)), None)
            why, source = f"{blocks.value} blocks x {size} / {length} tokens = {x:.2f}x", concurrency
        if size and size & (size - 1) == 0:
            state.infer("block_size", size, source, f"inferred: {why}")
    size = state.value("block_size")
    if blocks and size and tokens is None:
        state.infer("kv_cache_tokens", blocks.value * size, blocks, f"num_gpu_blocks {blocks.value} x block_size {size}")
    spec = state.fact("speculative_config")
    if spec is not None and (k := _SPEC_TOKENS.search(str(spec.value))) and (n := _int(k[1])) is not None:
        state.infer("num_speculative_tokens", n, spec, "from speculative_config")
    version = _version_tuple(state.value("vllm_version"))
    if state.value("engine_generation") is None and version:
        if version >= (0, 11):
            state.infer("engine_generation", "V1", state.fact("vllm_version"), "vLLM 0.11+ has only V1")
        elif version < (0, 6, 4):
            state.infer("engine_generation", "V0", state.fact("vllm_version"), "vLLM before 0.6.4 had only V0")
    if state.value("served_model_name") is None and (model := state.fact("model")):
        state.infer("served_model_name", model.value, model, "defaults to the model")


def _specific_errors(errors: list[StartupError]) -> list[StartupError]:
    """Drop generic exception lines when a startup error of a known kind explains them."""
    if any(e.kind != "other" for e in errors):
        return [e for e in errors if e.kind != "other"]
    return errors


def _nested_config(state: _StartupState, config: str, record: Record) -> None:
    """Facts printed inside the engine config's nested configs, read from the whole text because an
    excerpt often cuts the line inside ``compilation_config`` (its last item, which ``split_items``
    then drops): the CUDA-graph capture sizes, the largest of them, the structured-output backend."""
    if match := P.CAPTURE_SIZES.search(config):
        sizes = sorted({int(n) for n in re.findall(r"\d+", match["sizes"])})
        if sizes:
            state.set("cudagraph_capture_sizes", sizes, record, CONFIG)
            state.set("max_cudagraph_capture_size", sizes[-1], record, CONFIG)
    if match := P.MAX_CAPTURE_SIZE.search(config):
        state.set("max_cudagraph_capture_size", int(match["n"]), record, CONFIG)
    if match := P.STRUCTURED_BACKEND.search(config):
        state.set("structured_outputs_backend", match["backend"], record, CONFIG)


def split_items(body: str) -> list[tuple[str, str]]:
    """Top-level ``key=value`` items of a config or ``Namespace(...)`` repr.

    Items are separated by a comma, or by a space before ``key=`` (0.6.3/0.6.4 printed
    "chunked_prefill_enabled=%s multi_step_stream_outputs=%s" with no comma), outside brackets
    and quotes only: ``SpeculativeConfig(draft_model='m', num_spec_tokens=5)`` is one value.
    Hand-written because the text is a repr of objects that are not Python literals
    (``torch.bfloat16``, ``<CompilationMode.X: 2>``, ``KernelConfig(...)``) and is often cut
    by an excerpt or a line-length limit: unless the closing bracket is reached, the last item
    may be cut and is dropped.
    """
    items: list[str] = []
    openers: list[str] = []
    quote = ""
    start = 0
    complete = False
    i = 0
    while i < len(body):
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{" or (ch == "<" and body[i + 1 : i + 2].isalpha()):  # <Enum.X: 2>
            openers.append(ch)
        elif ch == ">" and openers and openers[-1] == "<":
            openers.pop()
        elif ch in ")]}":
            if not openers:
                complete = True
                break
            openers.pop()
        elif not openers and (ch == "," or (ch == " " and _KEY_AHEAD.match(body, i + 1))):
            items.append(body[start:i])
            start = i + 1
        i += 1
    if complete:
        items.append(body[start:i])
    pairs: list[tuple[str, str]] = []
    for item in items:
        key, sep, value = item.strip().partition("=")
        if sep and key.isidentifier():
            pairs.append((key, value.strip()))
    return pairs


def _dict_literal(body: str) -> dict[str, Any]:
    """``{'key': value, ...}``: a Python literal when whole, else its readable items."""
    try:
        value = ast.literal_eval(body)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    return {key: literal_value(raw) for key, raw in split_items(re.sub(r"'(\w+)': ", r"\1=", body[1:]))}


def literal_value(raw: str) -> Any:
    """A printed value as a number, boolean, string, list or dict where it reads as one."""
    raw = raw.strip()
    try:
        return ast.literal_eval(raw)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if _DIGITS.fullmatch(raw):  # a number literal_eval refused: past Python's 4,300-digit limit, no value
        return None
    if raw.startswith("torch."):
        return raw[len("torch."):]
    if enum := re.fullmatch(r"[A-Z]\w*\.([A-Z][A-Z0-9_]*)", raw):  # LoadFormat.AUTO
        return enum[1].lower()
    return raw


def _int(text: str) -> int | None:
    """A count as the log prints it (``1,024``), bounded (``doctor.foundation.wire.number``): ``None`` when
    beyond any real count, and the fact is then not kept."""
    return number(text.replace(",", ""), int)


def _float(text: str) -> float | None:
    return number(text)


def _device(name: str) -> str:
    return "GPU" if name.lower() in ("gpu", "cuda") else name if "+" in name else name.upper()


def _version_tuple(version: Any) -> tuple[int, ...] | None:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", str(version or ""))
    return tuple(n for g in match.groups() if g is not None and (n := _int(g)) is not None) if match else None
