"""The result model: what checks return, what the classifier decides, what renderers show.

Renderers in ``reports/`` see only ``Report``; checks build ``Finding`` objects. Everything
here serialises through ``doctor.foundation.serial`` and its JSON shape is a published contract
(``reports/schema/report.schema.json``): keep field names stable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from doctor.evidence import Bundle
from doctor.foundation.strenum import StrEnum


class Severity(str, Enum):
    """How much a finding matters, ``info`` < ``warning`` < ``critical`` (``rank``): findings are listed
    most severe first, risks are named under a healthy headline from ``warning`` up (``risks_of``),
    and a strict ``--fail-on`` level gates on it (``FailOn``)."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return {"info": 1, "warning": 2, "critical": 3}[self.value]


class FailOn(str, Enum):
    """What ``--fail-on`` exits 1 for (``doctor.exit_codes.exit_code_for``).

    ``felt`` (the default): latency users felt, an unhealthy verdict or a felt finding at warning
    or above; a risk alone exits 0, so a scheduled check pages only for what users felt. A
    severity: any finding at or above it, risks included, for a strict gate.
    """

    FELT = "felt"
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def severity(self) -> Severity | None:
        """The severity a strict level gates on; None for ``felt``."""
        return None if self is FailOn.FELT else Severity(self.value)


class SymptomClass(str, Enum):
    """Which part of the user's experience a check speaks to."""

    PRE_FIRST_TOKEN = "pre-first-token"
    INTER_TOKEN = "inter-token"
    PROXY_ONLY = "proxy-only"
    CAPACITY_CONFIG = "capacity-config"
    GENERAL = "general"
    SCALING = "scaling"  # the autoscaler in front of the replicas: why no replica came


class Cause(StrEnum):
    """The decomposition component a check's finding explains: what the classifier matches on.

    A check declares one (``@check(..., cause=Cause.QUEUE)``); ``doctor.verdict.remedy`` maps the
    components of the latency decomposition to the causes that explain them, so a new cause
    means a new entry there too. Grouped by the symptom class its checks usually speak to.
    """

    # pre-first-token
    QUEUE = "queue"
    PREFILL = "prefill"
    TRANSPORT = "transport"
    COLD_START = "cold-start"
    QUEUE_LOAD = "queue-load"  # requests waiting on load alone; explains the queue when QUEUE does not
    WEDGE = "wedge"  # the engine stands still behind a green /health: requests never get a first token
    # inter-token
    DECODE = "decode"  # the engine's steady per-token speed (CUDA graphs, interconnect)
    PREEMPTION = "preemption"
    PREFILL_INTERFERENCE = "prefill-interference"
    BATCH_DEPTH = "batch-depth"
    TOKEN_BUNDLING = "token-bundling"
    GPU_STATE = "gpu-state"
    ENGINE_PAUSE = "engine-pause"  # every stream frozen at once with no prompt arriving (GC)
    FRONTEND = "frontend"  # the API server's one process saturated: the engine is faster than the stream
    STRUCTURED_OUTPUT = "structured-output"  # a schema's compile, constrained decoding, a tool-call parser
    # proxy-only
    BUFFERING = "buffering"
    COMPRESSION = "compression"
    GATEWAY_SERIALISATION = "gateway-serialisation"
    GATEWAY_OVERHEAD = "gateway-overhead"
    PROXY_TIMEOUT = "proxy-timeout"
    GATEWAY_CAP = "gateway-cap"  # the gateway's own limit on streams to the engine queues or refuses them
    GATEWAY_RETRIES = "gateway-retries"  # the gateway sends requests to the engine again
    REFRAMING = "reframing"  # the gateway changes the stream framing: a compatibility note, no latency
    # neither
    CAPACITY = "capacity"
    CONFIG = "config"
    ERRORS = "errors"
    CLIENT = "client"
    THROUGHPUT = "throughput"
    CACHE = "cache"
    BALANCE = "balance"
    ROUTING = "routing"  # the router between the gateway and the replicas chose badly: a hot replica, a dead one
    SCALING = "scaling"  # the autoscaler's signal, bounds or state kept replicas from coming


class Symptom(str, Enum):
    """The verdict: where most of the latency users feel is created."""

    PRE_FIRST_TOKEN = "pre-first-token"
    INTER_TOKEN = "inter-token"
    PROXY_ONLY = "proxy-only"
    HEALTHY = "healthy"
    INCONCLUSIVE = "inconclusive"


class Outcome(str, Enum):
    """What one check concluded: a finding, a pass, not applicable to this setup, evidence it needs
    missing from the bundle, or an error of the check itself (isolated, so the run goes on)."""

    PASS = "pass"
    FINDING = "finding"
    NOT_APPLICABLE = "not-applicable"
    MISSING_EVIDENCE = "missing-evidence"
    ERROR = "error"


@dataclass
class EvidenceValue:
    """A number a finding rests on, with its unit and where it came from."""

    name: str
    value: Any
    unit: str = ""
    source: str = ""  # e.g. "stream: gateway, p90 over n=16", "metrics: vllm:num_preemptions delta", "log line 42"


#: The latency half of every remediation's verification (``llm-doctor verify``): the changed stack
#: (URL) re-probed with the saved run's (REPORT's) own shape and budgets, its verdict's symptom said
#: gone or not.
VERIFY_REPORT = "llm-doctor verify REPORT --candidate URL"

#: How every remediation's verify text opens: the same probe, one change.
RERUN_OPENING = "re-run the same probe after changing only this"

#: How every remediation is verified: the same probe, one change, through ``VERIFY_REPORT`` or a
#: whole ``diagnose``. Checks end it with what to expect (``doctor.checklib.rerun``); renderers
#: recognise it (``RERUN_INSTRUCTIONS``) to say it differently where it cannot be followed (a demo).
RERUN_INSTRUCTION = (f"{RERUN_OPENING}: `{VERIFY_REPORT}` (REPORT: this run's saved report or bundle) says whether "
                     "the verdict's symptom is gone, `llm-doctor diagnose` with the same flags re-checks everything")


def gate_command(*, long_context: bool = False) -> str:
    """The exact ``llm-doctor verify`` command of a change of the model's numerics: ``VERIFY_REPORT``
    with the unchanged stack as the answers' baseline, and the needle probe at the deployment's
    ``max_model_len`` too where the change is the KV cache's precision (``long_context``)."""
    return f"{VERIFY_REPORT} --baseline STABLE_URL" + (" --long-context" if long_context else "")


def gated_rerun_instruction(*, long_context: bool = False) -> str:
    """``RERUN_INSTRUCTION`` for a change of numerics: one command, the gate (``gate_command``),
    judges both the verdict's symptom and the answers, so it is the only one named."""
    kept = "the answers and the long-context needles kept" if long_context else "the answers kept"
    return (f"{RERUN_OPENING}: `{gate_command(long_context=long_context)}` (REPORT: this run's saved report or bundle; "
            f"STABLE_URL: the unchanged stack) exits 0 when the verdict's symptom is gone and {kept}")


#: Every opening a check's verify text has (``doctor.checklib.rerun`` and ``rerun_gated``), longest
#: first, for the renderers that say it differently (a demo).
RERUN_INSTRUCTIONS = (gated_rerun_instruction(long_context=True), gated_rerun_instruction(), RERUN_INSTRUCTION)


@dataclass
class Remediation:
    """Exactly one change to make, tied to the configuration in use."""

    setting: str  # an engine flag name (max_num_seqs), proxy directive (proxy_buffering), or architecture change
    suggested: str  # the value or direction, e.g. "16", "off", "lower to 2048"
    why: str
    verify: str  # how to check it worked: the same probe, re-run, one change at a time
    current: str | None = None  # current value when known
    where: str | None = None  # where the setting lives: "vllm serve flag", "nginx location block", ...


@dataclass
class Finding:
    """A check that fired: what it found (``summary``, with the numbers), how severe, which part of
    the latency it explains (``cause``) and whether users felt it, the one change to make and the
    evidence it rests on. What the verdict picks its remediation from and every renderer lists."""

    code: str
    name: str
    title: str
    severity: Severity
    symptom: SymptomClass
    summary: str  # one line, with the numbers
    remediation: Remediation
    evidence: list[EvidenceValue] = field(default_factory=list)
    # The decomposition component it explains: the check's declared cause (the runner always sets
    # it; None only for a Finding built by hand, as a test may).
    cause: Cause | None = None
    # Whether it measured latency users felt, or is a risk (``doctor.checking.contract.Fire.felt``): risks
    # never make the verdict's class, and exit 1 only under a strict ``--fail-on``.
    felt: bool = True


def risks_of(findings: list[Finding]) -> list[Finding]:
    """The risks worth a line under a healthy headline: findings users did not feel (``felt`` false)
    at warning or above, most severe first. One rule for the classifier's headline and every
    renderer, so the first risk named is the same everywhere."""
    return sorted((f for f in findings if not f.felt and f.severity.rank >= Severity.WARNING.rank),
                  key=lambda f: (-f.severity.rank, f.code))


@dataclass
class CheckResult:
    """Every selected check's outcome, findings included, and why (``message``): the report keeps
    them all so a reader sees what was checked and passed, not only what fired."""

    code: str
    name: str
    outcome: Outcome
    symptom: SymptomClass
    message: str = ""  # why pass / n-a / missing / error
    finding: Finding | None = None
    duration_ms: float = 0.0


@dataclass
class Component:
    """One part of the mean latency a decomposition splits (``Decomposition.ttft_basis`` / ``itl_basis``)."""

    name: str  # e.g. "queue", "prefill", "gateway", "transport", "preemption-stalls"
    seconds: float | None
    share: float | None = None  # of that whole, the basis (0..1)
    source: str = ""


@dataclass
class Decomposition:
    """Where the time above budget went, for first token and for inter-token gaps."""

    ttft_client_s: float | None = None
    ttft_budget_s: float | None = None
    ttft_components: list[Component] = field(default_factory=list)
    # What the first-token components add up to, e.g. "server TTFT mean 13.1 s (n=40, every
    # user's requests)": a mean (components are means), which the chart totals and names.
    ttft_basis: str | None = None
    tpot_client_s: float | None = None
    tpot_budget_s: float | None = None
    itl_components: list[Component] = field(default_factory=list)
    # What the inter-token components add up to, e.g. "direct TPOT mean": the engine's path,
    # which may not be the path users felt (a buffering gateway shortens the gateway's TPOT).
    itl_basis: str | None = None
    # The slow requests' own split, from the engine's span of each (the ``request_hops`` join): the
    # hops of the requests at or above the client's TTFT p90, summed over them, which a mean split
    # cannot show; empty without spans. ``ttft_slow_basis`` says what they add up to.
    ttft_slow_components: list[Component] = field(default_factory=list)
    ttft_slow_basis: str | None = None


@dataclass
class Budgets:
    """What users should feel: the usual interactive-chat targets by default."""

    ttft_s: float = 0.5
    tpot_s: float = 0.05


#: The metrics of one token's time, held to ``Practical.tpot_s``; the others to ``ttft_s``.
PER_TOKEN = ("TPOT", "ITL")


@dataclass(frozen=True)
class Practical:
    """The smallest shift of the typical request worth calling a regression: more than
    ``relative`` of the base run's median, and more than the metric's absolute floor.

    Both, because either alone misleads: 10 % of a 1 ms ITL is a tenth of a millisecond no one
    feels, and 10 ms of a 20 s answer is noise. 10 % is the smallest change worth a page (a
    budget is set with more headroom than that, and a 10 % TPOT change is a 10 % change in each
    stream's throughput). 10 ms for TTFT and E2E is a round trip within a region and a tenth of
    the delay a person notices; 1 ms for TPOT and ITL is what a loaded client's event loop and
    scheduler add to one gap, and a per-token change reaches users through E2E, which has its
    own threshold.

    It sits here beside ``Budgets``, the other thresholds a user sets, below both
    ``doctor.settings`` (which resolves it from ``--min-change``) and ``doctor.runs`` (whose
    ``compare_runs.judge`` applies it), so that neither folder imports the other for it.
    """

    relative: float = 0.10
    ttft_s: float = 0.010  # TTFT and E2E
    tpot_s: float = 0.001  # TPOT and ITL

    def floor(self, metric: str, base_median: float) -> float:
        """The shift ``metric`` must exceed: the larger of the relative and the absolute threshold."""
        absolute = self.tpot_s if metric in PER_TOKEN else self.ttft_s
        return max(self.relative * abs(base_median), absolute)


@dataclass
class Verdict:
    """The classifier's answer: where most of the latency users feel is created (``symptom``), one
    sentence with numbers, the reasoning in order, the one change to make first, the decomposition
    of the time above budget, and what evidence would have made it conclusive."""

    symptom: Symptom
    summary: str  # one sentence with numbers
    reasoning: list[str] = field(default_factory=list)  # the evidence chain, in order
    primary_remediation: Remediation | None = None
    primary_code: str | None = None  # the finding the remediation came from
    decomposition: Decomposition = field(default_factory=Decomposition)
    missing: list[str] = field(default_factory=list)  # what would have made it conclusive
    client_suspect: bool = False
    budgets: dict[str, float] = field(default_factory=dict)
    # False when the run ended before it could show what the headline says (a healthy verdict
    # on fewer fast answers than the adaptive stop needs): "within budget so far".
    conclusive: bool = True


@dataclass
class Report:
    """What renderers receive: the verdict, every check result, and the evidence behind them."""

    report_version: int
    tool_version: str
    generated_at: str
    verdict: Verdict
    findings: list[Finding]
    results: list[CheckResult]
    bundle: Bundle
    # derived evidence (stream stats, metric deltas, log facts), as JSON; renderers read each back
    # into its dataclass through ``doctor.derive.view_json.view``
    views: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # e.g. a third-party check that failed to load
