"""vLLM's log reader: kept log lines -> ``LogFacts``: the facts of the last startup, its errors, the stats series.

Works on the lines the scanner kept (``LogLine(no, text)``) and on nothing else, so that a newer
parser re-reads the lines stored in an old bundle. A log can hold several startups (restarts);
a new one begins when a startup marker (version banner, engine arguments, engine config) comes
after lines that a running engine prints, or, in a paste without markers, when a process that
already loaded its weights and sized its KV cache loads them again. Within a startup the same fact is often printed more
than once (once per worker process, twice for hybrid models): the first statement of the most
direct kind wins, so a resolved value (the engine config, "Using max model len") beats the
command-line argument, which beats an inference.

The ranks and the startup being read are ``vllm_startup``, the engine's arguments and config
``vllm_config``, how a printed value is read ``doctor.logscan.printed_values``; this module is the loop that
routes each record to its kind of line (marker, fact, error, stats, preemption).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from doctor.engine_readers import vllm_patterns as P  # noqa: N812 - P.NAME reads as "the pattern NAME"
from doctor.engine_readers.vllm_config import SECRET_ARG, config_items, nested_config
from doctor.engine_readers.vllm_startup import (
    ARGS_PHASE,
    ARGUMENT,
    CONFIG,
    CONFIG_PHASE,
    INFERRED,
    LOAD_PHASE,
    RUNNING_PHASE,
    STATED,
    VERSION_PHASE,
    StartupState,
    finish_startup,
    specific_errors,
)
from doctor.evidence.log import LogLine
from doctor.logscan.gate import OTHER_ERROR, OUT_OF_MEMORY
from doctor.logscan.parsed import LogFacts, StatsPoint
from doctor.logscan.prefixes import Record, iter_records
from doctor.logscan.printed_values import as_count, as_device, as_float, dict_literal, split_items

_PROFILING_ROWS: dict[str, str] = {
    "total_gpu_memory": "total_gpu_memory_gib",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "the current vLLM instance can use": "usable_memory_gib",
    "model weights take": "weights_memory_gib",
    "non_torch_memory": "non_torch_memory_gib",
    "PyTorch activation peak memory": "activation_peak_gib",
    "available_kv_cache_memory": "kv_cache_memory_gib",
}

_V1_PROCESS = re.compile(r"^(?:EngineCore|VllmWorker rank=|Worker_|DPEngineCore)")


class _Parser:
    def __init__(self) -> None:
        self.startups: list[StartupState] = []
        self.stats: list[StatsPoint] = []

    @property
    def current(self) -> StartupState:
        return self.startups[-1]

    def feed(self, record: Record) -> None:
        if not self.startups:
            self.startups.append(StartupState(first_line=record.no, last_line=record.no))
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

    def _open(self, phase: int, record: Record) -> StartupState:
        """The startup a marker of ``phase`` belongs to, opening a new one after a running engine."""
        if self.current.phase > phase:
            self.startups.append(StartupState(first_line=record.no, last_line=record.no))
        state = self.current
        state.phase = max(state.phase, phase)
        return state

    def _reload(self, record: Record) -> StartupState:
        """The startup a weights-loaded line belongs to: a new one when the same process (by
        name: a restart changes its pid) already loaded and went on to size the cache. Every
        tensor-parallel worker loads before any sizes the cache, so a TP log stays one startup;
        data-parallel engines load on their own, but under names of their own (``EngineCore_DP1``)."""
        process = record.process.split(" pid=")[0] if record.process else None
        if self.current.phase >= RUNNING_PHASE and process in self.current.loaded_by:
            self.startups.append(StartupState(first_line=record.no, last_line=record.no))
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
            config_items(state, split_items(match["config"]), record, CONFIG)
            nested_config(state, match["config"], record)
        elif match := P.ARGS_NAMESPACE.match(message):
            state = self._open(ARGS_PHASE, record)
            config_items(state, split_items(match["body"]), record, ARGUMENT)
        elif match := P.NON_DEFAULT_ARGS.match(message):
            state = self._open(ARGS_PHASE, record)
            args = dict_literal(match["body"])
            config_items(state, list(args.items()), record, ARGUMENT)
            state.set("non_default_args", {k: v for k, v in args.items() if not SECRET_ARG.search(k)}, record, STATED)
        elif match := P.WRAPPER_CONFIG.search(message):  # a wrapper's arguments for the engine it starts
            state = self._open(ARGS_PHASE, record)
            config_items(state, list(dict_literal(match["body"]).items()), record, ARGUMENT)
        else:
            self._fact(record, message)


    # -- facts of a running or starting engine ----------------------------------------------

    def _fact(self, record: Record, message: str) -> None:
        state = self.current
        running = RUNNING_PHASE
        if match := P.KV_CACHE_SIZE.match(message):
            state.set("kv_cache_tokens", as_count(match["tokens"]), record, STATED)
            state.set("kv_cache_device", as_device(match["device"]), record, STATED)
            if match["length"]:
                state.set("max_concurrency", as_float(match["x"]), record, STATED)
                state.set("max_concurrency_tokens", as_count(match["length"]), record, STATED)
            state.set("engine_generation", "V1", record, INFERRED, note="V1 KV-cache size line")
        elif match := P.CONCURRENCY.match(message):
            state.set("max_concurrency", as_float(match["x"]), record, STATED)
            state.set("max_concurrency_tokens", as_count(match["length"]), record, STATED)
        elif match := P.BLOCKS.match(message):
            gpu = as_count(match["gpu"])
            state.set("num_gpu_blocks", gpu, record, STATED)
            state.set("kv_cache_device", as_device(match["device"] or match["bare"]), record, STATED)
            if match["cpu"] is not None:
                state.set("num_cpu_blocks", as_count(match["cpu"]), record, STATED)
            # V0 pairs the GPU blocks with CPU (swap) blocks; V1 (0.6.4-0.7.3) printed them alone.
            generation = "V0" if match["cpu"] is not None else "V1"
            state.set("engine_generation", generation, record, INFERRED, note="block-count line format")
            if gpu == 0:
                state.error("no-cache-memory", f"{message}: no memory is left for the KV cache "
                            "(vLLM stops with 'No available memory for the cache blocks')", record)
        elif match := P.OVERRIDE_BLOCKS.match(message):
            state.set("num_gpu_blocks", as_count(match["n"]), record, STATED + 1)  # replaces the computed count
            state.set("num_gpu_blocks_computed", as_count(match["computed"]), record, STATED)
        elif match := P.CACHE_CONFIG_INFO.match(message):
            state.set("num_gpu_blocks", as_count(match["n"]), record, STATED)
        elif match := P.AVAILABLE_KV.match(message) or P.CPU_KV_SET.match(message):
            state.set("kv_cache_memory_gib", as_float(match["gib"]), record, STATED)
        elif match := P.WEIGHTS.match(message):
            state = self._reload(record)
            state.set("weights_memory_gib", as_float(match["gib"]), record, STATED)
            running = LOAD_PHASE  # every worker prints its own: only sizing the cache ends loading
        elif match := P.PROFILING_TIME.match(message):
            state.set("memory_profiling_s", as_float(match["s"]), record, STATED)
        elif match := P.INSTANCE_CAN_USE.match(message):
            state.set("total_gpu_memory_gib", as_float(match["total"]), record, STATED)
            state.set("gpu_memory_utilization", as_float(match["util"]), record, STATED)
            state.set("usable_memory_gib", as_float(match["usable"]), record, STATED)
        elif match := P.PROFILING_BREAKDOWN.match(message):
            state.set("weights_memory_gib", as_float(match["weights"]), record, STATED)
            state.set("non_torch_memory_gib", as_float(match["non_torch"]), record, STATED)
            state.set("activation_peak_gib", as_float(match["activation"]), record, STATED)
            state.set("kv_cache_memory_gib", as_float(match["kv"]), record, STATED)
        elif match := P.PROFILING_ROW.match(message):
            state.set(_PROFILING_ROWS[match["key"]], as_float(match["value"]), record, STATED)
        elif match := P.PROFILING_064.match(message):
            state.set("total_gpu_memory_gib", as_float(match["total"]), record, STATED)
            state.set("kv_cache_memory_gib", as_float(match["kv"]), record, STATED)
            state.set("gpu_memory_utilization", as_float(match["util"]), record, STATED)
        elif match := P.GRAPH_CAPTURED.match(message):
            state.set("cuda_graph_time_s", as_float(match["s"]), record, STATED)
            if match["gib"]:
                state.set("cuda_graph_memory_gib", as_float(match["gib"]), record, STATED)
        elif match := P.CAPTURE_CAPPED.match(message):
            state.set("max_cudagraph_capture_size", as_count(match["n"]), record, STATED, note=f"capped from {match['was']}")
        elif match := P.GRAPH_POOL.match(message):
            state.set("cuda_graph_memory_gib", as_float(match["gib"]), record, STATED)
        elif match := P.GRAPH_ESTIMATE.match(message):
            state.set("cuda_graph_memory_gib", as_float(match["gib"]), record, CONFIG, note="estimated before capture")
        elif match := P.GRAPH_PROFILING_ADVICE.search(message):
            state.set("gpu_memory_utilization", as_float(match["util"]), record, STATED)
            state.set("gpu_memory_utilization_equivalent", as_float(match["equivalent"]), record, STATED)
            if match["suggested"]:
                state.set("gpu_memory_utilization_suggested", as_float(match["suggested"]), record, STATED)
        elif match := P.TORCH_COMPILE.match(message):
            state.set("torch_compile_s", as_float(match["s"]), record, STATED)
        elif match := P.INIT_ENGINE.match(message):
            state.set("init_engine_s", as_float(match["s"]), record, STATED)
        else:
            running = CONFIG_PHASE
            if match := P.MAX_MODEL_LEN.match(message):
                state.set("max_model_len", as_count(match["n"]), record, STATED)
            elif match := P.CHUNKED_PREFILL.match(message):
                state.set("chunked_prefill", True, record, STATED)
                state.set("max_num_batched_tokens", as_count(match["n"]), record, STATED)
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
            state.set("max_model_len", as_count(match["length"]), record, INFERRED, note="from the startup error")
            state.set("kv_cache_memory_gib", as_float(match["available"]), record, INFERRED, note="from the startup error")
            state.set("kv_cache_needed_gib", as_float(match["needed"]), record, STATED)
            if match["estimate"]:
                state.set("estimated_max_model_len", as_count(match["estimate"]), record, STATED)
        elif match := P.V0_LEN_EXCEEDS_KV.search(message):
            state.error("max-len-exceeds-kv", message, record)
            state.set("max_model_len", as_count(match["length"]), record, INFERRED, note="from the startup error")
            state.set("kv_cache_tokens", as_count(match["capacity"]), record, INFERRED, note="from the startup error")
        elif match := P.FREE_MEMORY_BELOW.search(message):
            state.error("memory-below-utilisation", message, record)
            state.set("gpu_memory_utilization", as_float(match["util"]), record, ARGUMENT)
            state.set("free_memory_gib", as_float(match["free"]), record, STATED)
            state.set("total_gpu_memory_gib", as_float(match["total"]), record, STATED)
        elif OUT_OF_MEMORY.search(message):
            state.error("oom", message, record)
        elif OTHER_ERROR.search(message):
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
            prompt_throughput=as_float(match["prompt"]),
            generation_throughput=as_float(match["generation"]),
            engine=match["engine"] or match["aggregated"],
            startup=len(self.startups) - 1,
        )
        usages: list[tuple[str, float]] = []
        for part in P.STATS_PART.finditer(message, match.end()):
            if part["queue"]:
                setattr(point, part["queue"].lower(), as_float(part["reqs"]))
            elif part["preemptions"]:
                point.preemptions = as_float(part["preemptions"])
            elif part["device"]:
                if (usage := as_float(part["usage"])) is not None:
                    usages.append((part["device"], usage))
            else:
                point.prefix_cache_hit_pct = as_float(part["hit"])
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
        if match["total"] and (total := as_count(match["total"])) is not None:
            state.preemptions_cumulative = max(total, state.preemptions_cumulative or 0)
        state.set("engine_generation", "V0", record, INFERRED, note="V0 preemption warning")
        state.phase = RUNNING_PHASE

    def _prefix_hit_rate(self, record: Record, message: str) -> None:
        """Attach V0's separate "Prefix cache hit rate: GPU: x%" line to the stats line before it."""
        match = P.V0_PREFIX_HIT.search(message)
        if match and self.stats and record.no - self.stats[-1].line <= 2:
            self.stats[-1].prefix_cache_hit_pct = as_float(match["gpu"])

    # -- result -----------------------------------------------------------------------------

    def result(self, source: str) -> LogFacts:
        startups = [finish_startup(state) for state in self.startups]
        facts = LogFacts(source=source, stats=self.stats, startups=startups)
        if self.startups:
            last = self.startups[-1]
            facts.facts = {key: fact for key, (_rank, fact) in sorted(last.facts.items())}
            facts.errors = specific_errors(last.errors)
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

