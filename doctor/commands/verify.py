"""``llm-doctor verify``: whether a changed stack fixed what users felt and still answers as the stable one.

Two live endpoints (``--baseline`` the stable, ``--candidate`` the canary or the "after"), or a
saved incident (``verify REPORT --candidate URL``) whose own request shape and budgets are
re-probed on the candidate. Each half PASS / FAIL / ABSTAIN with reasons:

- answers (``doctor.verify``): the prompts asked of both (``doctor.probes.answers``), the
  baseline ``--repeats`` times for its floor, the candidate twice (its own determinism), the
  baseline's answers scored by both where the engine can;
- long context (``--long-context``, ``doctor.verify.needles``): needles in a haystack at the
  ``max_model_len`` /v1/models gives, asked in the same round as the prompts;
- latency: the stream probe over both at once, the baseline as the direct path and the candidate
  as the other, so their requests are paired and interleaved at the same shape and concurrency
  (``doctor.probes.schedule``), then judged by ``compare``'s rule.

Everything the user gives is checked before the first request (a bad prompts line, an unreadable
recording, an output file that cannot be written): one line and exit 2.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from doctor.checking.registry import load_registry
from doctor.commands.analyze import reanalyse
from doctor.commands.emit import deliver
from doctor.derive.stream_stats import request_stats
from doctor.evidence import ProbePath, StreamEvidence
from doctor.exit_codes import ExitCode
from doctor.foundation.clock import Clock
from doctor.foundation.console import progress
from doctor.foundation.errors import UsageError
from doctor.model import Practical, Report, Symptom, Verdict
from doctor.probes.answers import Gathered, Target, gather, identify, prompt_tokens
from doctor.probes.deadlines import RunDeadline
from doctor.probes.http import without_credentials
from doctor.probes.stream import run_stream_probe
from doctor.runs import pipeline
from doctor.runs.compare_runs import request_samples
from doctor.runs.verify_outcome import (
    FAILED_SHARE,
    Endpoint,
    LatencyVerdict,
    SymptomCheck,
    VerifyResult,
    judge_latency,
    judge_symptom,
)
from doctor.settings import RunSettings
from doctor.verify.answers import Answer
from doctor.verify.gate import Decision, decide, modal
from doctor.verify.needles import RESERVE_TOKENS, NeedleVerdict, calibration_prompts, decide_needles, needle_prompts
from doctor.verify.prompts import Prompt, PromptFileError, builtin, parse_prompts
from doctor.verify.record import Recorded, dump, load
from doctor.verify.scoring import Scored, pooled, score
from reports.verify_report import print_verify, render_verify_html, verify_json, verify_markdown

#: The candidate's repeats: two show whether it honours the seed, at the cost of one more answer per prompt.
CANDIDATE_REPEATS = 2
#: Measured requests per endpoint of the latency half when --requests is not given: testable by the
#: U test with room (4 a side is the least) and a few seconds on a CPU engine.
LATENCY_REQUESTS = 12

#: The symptom each verdict names, by the metric that shows it.
_SYMPTOM_METRIC = {Symptom.PRE_FIRST_TOKEN: "TTFT", Symptom.INTER_TOKEN: "TPOT", Symptom.PROXY_ONLY: "TTFT"}


def read_prompts(path: Path | None) -> list[Prompt]:
    """The built-in set, or the file's; a bad line is a ``UsageError`` naming it (before any request)."""
    if path is None:
        return builtin()
    try:
        return parse_prompts(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise UsageError(f"--prompts {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--prompts {path}: not UTF-8 text") from None
    except PromptFileError as exc:
        raise UsageError(f"--prompts {exc}") from None


def read_recording(path: Path) -> Recorded:
    try:
        return load(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise UsageError(f"--baseline-answers {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"--baseline-answers {exc}") from None


def run(settings: RunSettings, *, report: Path | None, prompts_file: Path | None, baseline_answers: Path | None,
        save_answers: Path | None, repeats: int, answers: bool, latency: bool, long_context: bool = False,
        max_model_len: int | None = None) -> ExitCode:
    """Check every input, ask both endpoints, print and write the verdicts; the exit code of ``VerifyResult``."""
    assert settings.collect is not None
    config = settings.collect
    if repeats < 2:
        raise UsageError("--repeats must be at least 2: the baseline's floor is the difference between its repeats")
    if max_model_len is not None and max_model_len < 2 * RESERVE_TOKENS:
        raise UsageError(f"--max-model-len {max_model_len}: the long-context probe needs at least {2 * RESERVE_TOKENS} tokens")
    prompts = read_prompts(prompts_file) if answers else []
    recorded = read_recording(baseline_answers) if baseline_answers else None
    incident = reanalyse(report, settings, None) if report is not None else None
    live_baseline = config.gateway is not None
    cand_url = config.gateway if live_baseline else config.engine
    assert cand_url is not None
    result = VerifyResult(
        baseline=Endpoint("baseline", without_credentials(config.engine), None) if live_baseline and config.engine else
        Endpoint("baseline", None, recorded.model, recorded.engine, str(baseline_answers)) if recorded else None,
        candidate=Endpoint("candidate", without_credentials(cand_url)))
    deadline = RunDeadline(config.deadline_s)
    needles = Needles(long_context, max_model_len)
    if (answers or long_context) and (live_baseline or recorded):
        _answers(settings, prompts, recorded, result, repeats, deadline, save_answers, needles)
    elif (answers or long_context) and save_answers is not None:  # record the one endpoint given, for a later --baseline-answers
        _record_only(settings, prompts, cand_url, repeats, deadline, save_answers, result, needles)
    elif answers or long_context:
        result.notes.append("answers not compared: give --baseline URL or --baseline-answers FILE")
    if incident is not None:
        result.symptom = _symptom(settings, *incident, cand_url, deadline)
    elif latency and live_baseline:
        result.latency = _latency(settings, deadline)
    return _emit(settings, result)


def _targets(settings: RunSettings, result: VerifyResult, recorded: Recorded | None) -> list[Target]:
    config = settings.collect
    assert config is not None
    cand = Target("candidate", config.gateway or config.engine or "", model=config.model)
    return [cand] if recorded else [Target("baseline", config.engine or "", model=config.model), cand]


@dataclass(frozen=True)
class Needles:
    """``--long-context``: whether to run the needle probe, at ``--max-model-len`` or what /v1/models gives."""

    wanted: bool
    max_model_len: int | None = None

    def prompts(self, targets: list[Target], settings: RunSettings, deadline: RunDeadline) -> tuple[list[Prompt], int | None]:
        """The needle prompts and the length they were built at (the first target's /v1/models unless
        given), sized in the first target's tokens; none when not wanted or no length is known (the
        verdict then says why)."""
        if not self.wanted:
            return [], None
        config = settings.collect
        assert config is not None
        identify(targets, config.http, deadline)
        length = self.max_model_len or next((t.max_model_len for t in targets if t.max_model_len), None)
        if not length:
            return [], None
        alone, sample = prompt_tokens(targets[0], list(calibration_prompts()), config.http, deadline)
        return needle_prompts(length, (alone, sample) if alone and sample else None), length

    def verdict(self, got: Gathered, length: int | None) -> NeedleVerdict | None:
        if not self.wanted:
            return None
        if length is None:
            return NeedleVerdict(Decision.ABSTAIN, ["no max_model_len: /v1/models does not give one; give --max-model-len N"])
        return decide_needles(got.answers.get("baseline", {}), got.answers.get("candidate", {}), length)


def _answers(settings: RunSettings, prompts: list[Prompt], recorded: Recorded | None, result: VerifyResult, repeats: int,
             deadline: RunDeadline, save_answers: Path | None, needles: Needles) -> None:
    """The answers half and the long-context probe, from one round of requests (and one recording)."""
    config = settings.collect
    assert config is not None
    targets = _targets(settings, result, recorded)
    wanted = {"baseline": 0 if recorded else repeats, "candidate": CANDIDATE_REPEATS}
    long_prompts, length = needles.prompts(targets, settings, deadline)
    scored_ids = {p.id for p in prompts}

    def references(got: Gathered) -> dict[str, Answer]:
        refs = _references(recorded.answers if recorded else got.answers["baseline"])
        return {pid: ref for pid, ref in refs.items() if pid in scored_ids}  # a needle's answer is not scored

    got = gather(targets, prompts + long_prompts, wanted, references, config.http, deadline, progress=progress)
    if recorded:  # the recording stands in for the baseline: its answers, its scorings
        got.answers["baseline"], got.scores["baseline"] = recorded.answers, recorded.scores
        if recorded.unavailable:
            got.unavailable.setdefault("baseline", recorded.unavailable)
    for target in targets:
        side = result.candidate if target.role == "candidate" else result.baseline
        if side is not None:
            side.model, side.engine = target.model, target.engine
        if target.error:
            result.notes.append(target.error)
    if note := got.deadline_note(deadline.seconds):
        result.notes.append(note)
    if save_answers is not None and not recorded:
        _save(save_answers, got, "baseline", targets[0])
    if prompts:
        result.answers = decide(prompts, got.answers["baseline"], got.answers["candidate"], _scored(got))
    result.long_context = needles.verdict(got, length)


def _references(answers: dict[str, list[Answer]]) -> dict[str, Answer]:
    """The answer each prompt is scored on: the baseline's most common, where it answered."""
    return {pid: ref for pid, given in answers.items() if given and (ref := modal(given)[0]).ok}


def _scored(got: Gathered) -> Scored:
    """The teacher-forced pool: each prompt the baseline scored, against the candidate's one scoring."""
    base, cand = got.scores.get("baseline", {}), got.scores.get("candidate", {})
    rows = [score(pid, scorings, cand[pid][0] if cand.get(pid) else None) for pid, scorings in base.items() if scorings]
    scored = pooled(rows)
    why = got.unavailable.get("candidate") or got.unavailable.get("baseline")
    if why and not scored.tokens:
        scored.unavailable = why
    return scored


def _save(path: Path, got: Gathered, role: str, target: Target) -> None:
    recorded = Recorded(got.answers[role], got.scores.get(role, {}), target.model, target.engine, got.unavailable.get(role))
    try:
        path.write_text(dump(recorded), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--save-answers {path}: {exc.strerror or exc}") from None
    progress(f"wrote {path}")


def _record_only(settings: RunSettings, prompts: list[Prompt], url: str, repeats: int, deadline: RunDeadline,
                 path: Path, result: VerifyResult, needles: Needles) -> None:
    """``--save-answers`` with one endpoint: its answers and scorings (and needle answers), recorded as a future baseline."""
    config = settings.collect
    assert config is not None
    target = Target("baseline", url, model=config.model)
    long_prompts, _ = needles.prompts([target], settings, deadline)
    scored_ids = {p.id for p in prompts}

    got = gather([target], prompts + long_prompts, {"baseline": repeats},
                 lambda got: {k: v for k, v in _references(got.answers["baseline"]).items() if k in scored_ids}, config.http,
                 deadline, progress=progress)
    _save(path, got, "baseline", target)
    if note := got.deadline_note(deadline.seconds):
        result.notes.append(note)
    result.candidate.model, result.candidate.engine = target.model, target.engine
    result.notes.append(f"recorded {sum(len(a) for a in got.answers['baseline'].values())} answers of {without_credentials(url)} in {path}")


def _samples(stream: StreamEvidence | None, path: ProbePath) -> dict[str, list[float]]:
    """TTFT and TPOT of each measured, answered request of ``path``, as ``stream_stats`` counts them."""
    stats = [request_stats(t) for t in (stream.requests if stream else []) if t.path == path and not t.warmup and t.ok]
    return {"TTFT": [s.ttft for s in stats if s.ttft is not None], "TPOT": [s.tpot for s in stats if s.tpot is not None]}


def _probe(settings: RunSettings, deadline: RunDeadline, **changes: Any) -> StreamEvidence | None:
    config = settings.collect
    assert config is not None
    fixed = {"adaptive": False, "requests": config.requests or LATENCY_REQUESTS, "metrics": False, "gpu": False, "host": False,
             "log": None, "prometheus": None}
    plan = replace(config, **{**fixed, **changes})
    stream, errors = run_stream_probe(plan, Clock(), progress, deadline_s=max(deadline.left(), 1.0))
    for error in errors:
        progress(f"{error.source}: {error.message}")
    return stream


def _failed(stream: StreamEvidence | None, path: ProbePath) -> tuple[int, int, str]:
    """(failed, measured, the first failure's words) of ``path``'s measured requests: a failed request
    is latency users felt too, which the answered requests' samples leave out."""
    measured = [t for t in (stream.requests if stream else []) if t.path == path and not t.warmup]
    failed = [t for t in measured if not t.ok]
    return len(failed), len(measured), (f"{failed[0].outcome} ({failed[0].error or 'no message'})" if failed else "")


def _latency(settings: RunSettings, deadline: RunDeadline) -> LatencyVerdict:
    if deadline.left() < 1.0:
        return LatencyVerdict(Decision.ABSTAIN, [f"not measured: the run's {deadline.seconds:g} s --deadline ran out before it"])
    stream = _probe(settings, deadline)
    verdict = judge_latency(_samples(stream, ProbePath.DIRECT), _samples(stream, ProbePath.GATEWAY), settings.practical or Practical())
    (b_failed, b_n, _), (c_failed, c_n, first) = _failed(stream, ProbePath.DIRECT), _failed(stream, ProbePath.GATEWAY)
    if c_n and c_failed / c_n - (b_failed / b_n if b_n else 0.0) > FAILED_SHARE:
        verdict.decision = Decision.FAIL
        verdict.reasons.insert(0, f"the candidate failed {c_failed} of {c_n} requests (the baseline {b_failed} of {b_n}): {first}")
    elif b_failed or c_failed:
        verdict.notes.append(f"failed requests: baseline {b_failed} of {b_n}, candidate {c_failed} of {c_n}")
    return verdict


def _symptom(settings: RunSettings, incident: Report, saved: RunSettings, url: str, deadline: RunDeadline) -> SymptomCheck:
    """The incident re-diagnosed on ``url``, the changed stack, with the incident's own route, lengths,
    concurrency, budgets and checks (``saved``: its recorded analysis): whether the finding that
    named its symptom fires again, and its metric's p90 against the budget. Where the incident went
    through a gateway, ``url`` is that gateway and the incident's engine is probed beside it, as then,
    so that a proxy-only symptom can be seen again."""
    config = settings.collect
    assert config is not None and saved.analysis is not None
    run, verdict = incident.bundle.run, incident.verdict
    metric = _SYMPTOM_METRIC.get(verdict.symptom, "TTFT")
    path = ProbePath.GATEWAY if request_samples(incident, ProbePath.GATEWAY, metric) else ProbePath.DIRECT
    budget = verdict.budgets.get("ttft_s" if metric == "TTFT" else "tpot_s") or (
        config.budgets.ttft_s if metric == "TTFT" else config.budgets.tpot_s)
    engine, gateway = (run.engine_url, url) if path is ProbePath.GATEWAY else (url, None)
    before = request_samples(incident, path, metric)
    plan = replace(config, engine=engine, gateway=gateway, route=run.route or "chat", prompt_tokens=run.prompt_tokens or 256,
                   max_tokens=run.max_tokens or 64, concurrency=run.concurrency or 1,
                   requests=config.requests or max(LATENCY_REQUESTS, len(before)), adaptive=False, gpu=False, host=False,
                   log=None, prometheus=None, deadline_s=max(deadline.left(), 1.0))
    after = pipeline.diagnose(plan, saved.analysis, load_registry(), progress=progress)
    name = verdict.symptom.value + (f" ({verdict.primary_code})" if verdict.primary_code else "")
    failed, measured, _ = _failed(after.bundle.stream, path)
    return judge_symptom(name, metric, before, request_samples(after, path, metric), budget, _recurred(verdict, after),
                         failed=failed, measured=measured)


def _recurred(incident: Verdict, after: Report) -> str | None:
    """What the re-diagnosis says of the incident's symptom: the finding that named it firing again
    (its summary), "" when it does not, None when nothing could tell (an inconclusive incident)."""
    if incident.symptom is Symptom.INCONCLUSIVE:
        return None
    if incident.symptom is Symptom.HEALTHY or incident.primary_code is None:
        named = after.verdict.symptom
        return "" if named in (incident.symptom, Symptom.HEALTHY) else f"the re-diagnosis names {named.value}"
    again = next((f for f in after.findings if f.code == incident.primary_code and f.felt), None)
    return f"{again.code} fired again: {again.summary}" if again else ""


def _emit(settings: RunSettings, result: VerifyResult) -> ExitCode:
    deliver(settings.outputs, lambda console: print_verify(result, console),
            {"json": lambda: verify_json(result), "html": lambda: render_verify_html(result), "md": lambda: verify_markdown(result)})
    return result.exit_code()
