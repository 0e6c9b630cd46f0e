"""The check toolkit: what every check, built-in or third-party, uses to read evidence alike.

A check (``doctor.checking.contract``) is a pure function of evidence; these helpers make its numbers and
its remediation mean the same thing as every other check's:

- **settings in use** (``engine``): ``engine_setting`` reads a setting from the startup log,
  then the run record, then a stable vLLM default, as a ``Setting`` that knows its source;
  ``max_num_seqs_stated`` adds vLLM's V1 default, and ``max_num_seqs_in_use`` what the gauges
  imply (``inferred_max_num_seqs``); ``model_len`` adds /v1/models; ``is_off`` reads a flag.
  ``foreign_prompt_tokens`` (other users' prompts over the window) and ``prompt_tokens_around``
  (did a prompt arrive during one freeze) read the engine's prompt-token counter against the probe's own;
  ``process_cores`` is the serving process's CPU over the window (a saturated front end, LD211; a
  freeze that coincides with CPU starvation, LD210).
- **the host** (``host``): ``host_saturated``, the one rule for "the probe's host was CPU-saturated
  before the probe" (its CPU percent, or a load average at or over its CPUs), LD210's and LD507's,
  and ``host_values``, the snapshot it reads as evidence.
- **sizes** (``sizing``): ``tokens_per_request``, ``sequences_that_fit`` (the one formula for
  "how many sequences fit in the KV cache") and ``capped_utilization`` (the one ceiling for a
  suggested ``gpu_memory_utilization``).
- **paths** (``paths``): ``engine_path`` (the path that shows the engine best) and
  ``measured_pair`` (both paths, or it raises ``NotApplicable``).
- **the gateway** (``gateway``): ``detect_proxy`` (which proxy answered one response) and
  ``gateway_identity`` (the evidence lines naming it), response headers and stream compression; the ``gateway``
  view (``doctor.derive.gateway``) identifies it from every response for the built-in checks.
- **gateway settings** (one module per behaviour, ``gateway_phrasing`` for what they share):
  ``buffering_remediation`` (``buffering_advice``), ``compression_remediation``
  (``compression_advice``), ``response_start_remediation`` (``response_start_advice``),
  ``idle_timeout_for`` / ``idle_timeout_remediation`` (with ``IDLE_TIMEOUTS``, ``idle_timeout_advice``),
  ``cap_remediation`` (with ``QUEUEING_CAPS``), ``retry_remediation`` and ``hung_gateway_remediation``
  (with ``CONNECT_TIMEOUTS``; ``upstream_advice``): the
  setting each gateway family spells for the same behaviour, read from its record's rows
  (``doctor.gateways``).
- **gateway limits** (``gateway_limits``): ``gateway_refusal`` (a failed request the gateway
  answered itself), ``engine_intake`` (requests the engine took in over the window) against
  ``probe_sent``, ``gateway_wait`` (the staircase of an edge that lets fewer streams through) and
  ``stream_cap`` (how many streams it let run at once, against the direct path: ``StreamCap``).
- **structured output** (``structured``): ``constrained_run`` (a constrained ``--payload``'s
  requests in send order and its unconstrained twins, as ``ConstrainedRun``), ``request_ttft``
  and ``per_token`` (one request's TTFT and TPOT, for twins no derived view holds),
  ``generated_within`` (what the engine's generation counter did during a stream's silence).
- **remediations** (``remediation``): ``rerun`` (the verify text every remediation shares: the same
  probe after one change, ``llm-doctor verify REPORT --candidate URL`` for the latency half),
  ``rerun_gated`` (for a change of numerics, the one ``llm-doctor verify`` command that is also the
  answers gate; ``long_context`` for the KV cache's precision), ``gate_command`` (that gate's exact
  command, for wording that offers a numerics change beside the remediation's own setting),
  ``add_capacity`` (``queue_remediation``, ``capacity_advice``: growing a KV cache that holds fewer
  than two requests instead), ``step_budget`` (the step budget that other requests' prefills stall
  the streams by, as ``StepBudget``) with ``step_budget_remediation``, ``step_budget_evidence`` and
  ``step_budget_in_use`` (its words; ``step_budget_idle`` where it would cut nothing), ``vllm_flag`` (``vllm serve flag --max-num-seqs``) and ``engine_flag``
  (the same setting under the serving engine's own flag: the ``engine`` view a check declares tells
  which, ``engine_of`` applies its rule to what a caller holds;
  on an unidentified one, ``unidentified_setting``'s neutral wording, which checks whose lever is
  no flag use too);
  ``metric_read`` names the metric a window field came from, in the engine's own names, and
  ``engine_metric`` the engine's own metric for a field (``None`` where it has none).
- **autoscalers** (``scaling``): ``scalers_of`` and ``signals_of`` (what a scaling check judges;
  a router's scaler is not an engine's), ``judge_signals`` (a per-signal rule's loop),
  ``ScalerFault`` and ``scaler_fire`` (every object at fault named, the field by its path, the
  first's change), ``startup_s`` (a replica's start-up from the log, else ``DEFAULT_STARTUP_S``),
  ``queue_signal`` (the queue-depth signal in the product's words), ``engine_family`` and
  ``retired_metric`` (an engine metric under any spelling; one the engine no longer exports),
  ``serves_router`` and ``rescan`` (a scaling finding's verify text: the changed object read again,
  then a ``diagnose`` under the incident's load); ``history_scaler`` and ``tried`` (an HPA known
  from kube-state-metrics' history, and what it did).
- **absent metrics** (``doctor.engines.names``, which the reports share): ``not_in_metrics``, the one
  phrase for a metric the engine's /metrics lacked: "not exposed by ENGINE" for an identified
  engine, only "its /metrics has no ..." for an unidentified one (nothing says it lacks it).

``from doctor.checklib import engine_setting, rerun, vllm_flag``: the names below are the
public API (``tests/checks/test_checklib.py`` pins them); the submodules are its layout, not its
contract.
"""

from doctor.checklib.buffering_advice import buffering_remediation
from doctor.checklib.capacity_advice import queue_remediation
from doctor.checklib.compression_advice import compression_remediation
from doctor.checklib.engine_settings import (
    MIN_FLAT_SAMPLES,
    STABLE_DEFAULTS,
    V1_SERVE_MAX_NUM_SEQS,
    Setting,
    default_max_num_seqs,
    engine_metric,
    engine_of,
    engine_setting,
    foreign_prompt_tokens,
    inferred_max_num_seqs,
    is_off,
    max_num_seqs_in_use,
    max_num_seqs_stated,
    metric_read,
    model_len,
    process_cores,
    prompt_tokens_around,
)
from doctor.checklib.gateway_limits import StreamCap, engine_intake, gateway_refusal, gateway_wait, probe_sent, stream_cap
from doctor.checklib.gateway_responses import (
    COMPRESSED,
    detect_proxy,
    gateway_headers,
    gateway_identity,
    stream_encoding,
    who_answered,
)
from doctor.checklib.host import host_saturated, host_values
from doctor.checklib.idle_timeout_advice import IDLE_TIMEOUTS, idle_timeout_for, idle_timeout_remediation
from doctor.checklib.kv_arithmetic import (
    KV_FILL_TARGET,
    MAX_GPU_MEMORY_UTILIZATION,
    capped_utilization,
    sequences_that_fit,
    tokens_per_request,
)
from doctor.checklib.paths import PathPair, engine_path, measured_pair, ttft_wait
from doctor.checklib.remediation import (
    ENGINE_FLAGS,
    add_capacity,
    engine_flag,
    rerun,
    rerun_gated,
    unidentified_setting,
    vllm_flag,
)
from doctor.checklib.response_start_advice import response_start_remediation
from doctor.checklib.scaling import (
    DEFAULT_STARTUP_S,
    ScalerFault,
    engine_family,
    history_scaler,
    judge_signals,
    queue_signal,
    rescan,
    retired_metric,
    scaler_fire,
    scalers_of,
    serves_router,
    signals_of,
    startup_s,
    tried,
)
from doctor.checklib.step_budget import (
    StepBudget,
    step_budget,
    step_budget_evidence,
    step_budget_idle,
    step_budget_in_use,
    step_budget_remediation,
)
from doctor.checklib.structured import ConstrainedRun, constrained_run, generated_within, per_token, request_ttft
from doctor.checklib.upstream_advice import (
    CONNECT_TIMEOUTS,
    QUEUEING_CAPS,
    cap_remediation,
    hung_gateway_remediation,
    retry_remediation,
)
from doctor.derive.gateway import header
from doctor.engines.names import not_in_metrics
from doctor.gateways import TOKENS as KNOWN_PROXIES  # the families' tokens, public before the records were
from doctor.model import gate_command  # composed beside RERUN_INSTRUCTION, which the renderers read too

__all__ = [
    "COMPRESSED",
    "CONNECT_TIMEOUTS",
    "DEFAULT_STARTUP_S",
    "ENGINE_FLAGS",
    "IDLE_TIMEOUTS",
    "KNOWN_PROXIES",
    "KV_FILL_TARGET",
    "MAX_GPU_MEMORY_UTILIZATION",
    "MIN_FLAT_SAMPLES",
    "QUEUEING_CAPS",
    "STABLE_DEFAULTS",
    "V1_SERVE_MAX_NUM_SEQS",
    "ConstrainedRun",
    "PathPair",
    "ScalerFault",
    "Setting",
    "StepBudget",
    "StreamCap",
    "add_capacity",
    "buffering_remediation",
    "cap_remediation",
    "capped_utilization",
    "compression_remediation",
    "constrained_run",
    "default_max_num_seqs",
    "detect_proxy",
    "engine_family",
    "engine_flag",
    "engine_intake",
    "engine_metric",
    "engine_of",
    "engine_path",
    "engine_setting",
    "foreign_prompt_tokens",
    "gate_command",
    "gateway_headers",
    "gateway_identity",
    "gateway_refusal",
    "gateway_wait",
    "generated_within",
    "header",
    "history_scaler",
    "host_saturated",
    "host_values",
    "hung_gateway_remediation",
    "idle_timeout_for",
    "idle_timeout_remediation",
    "inferred_max_num_seqs",
    "is_off",
    "judge_signals",
    "max_num_seqs_in_use",
    "max_num_seqs_stated",
    "measured_pair",
    "metric_read",
    "model_len",
    "not_in_metrics",
    "per_token",
    "probe_sent",
    "process_cores",
    "prompt_tokens_around",
    "queue_remediation",
    "queue_signal",
    "request_ttft",
    "rerun",
    "rerun_gated",
    "rescan",
    "response_start_remediation",
    "retired_metric",
    "retry_remediation",
    "scaler_fire",
    "scalers_of",
    "sequences_that_fit",
    "serves_router",
    "signals_of",
    "startup_s",
    "step_budget",
    "step_budget_evidence",
    "step_budget_idle",
    "step_budget_in_use",
    "step_budget_remediation",
    "stream_cap",
    "stream_encoding",
    "tokens_per_request",
    "tried",
    "ttft_wait",
    "unidentified_setting",
    "vllm_flag",
    "who_answered",
]
