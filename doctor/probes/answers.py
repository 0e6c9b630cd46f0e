"""The eval gate's requests: each prompt's whole answer from the baseline and the candidate, and
teacher-forced scores of the baseline's answers where the engine can give them.

Answers are asked without streaming (the gate reads what was answered, not when), interleaved
baseline and candidate prompt by prompt, a few at a time, each under its own deadline and all
under the run's ``--deadline``. A request the run's deadline cut or left unsent is censored, as
the stream probe censors one: no answer and no failure of the endpoint (a slow candidate is not a
broken one), counted in ``Gathered.cut``; the gate decides on what came, and says what did not.

Teacher-forced scoring is vLLM's ``prompt_logprobs`` (the log-probability of every prompt token,
its ``vllm/entrypoints/openai/protocol.py``): the prompt followed by the baseline's answer is sent
as a prompt with ``max_tokens: 1`` and ``prompt_logprobs: 0`` (the prompt token's own entry only),
to ``/v1/completions`` for a completion and to ``/v1/chat/completions`` with the answer as the
final assistant message (``continue_final_message``, ``add_generation_prompt: false``) for a chat,
whose template then frames it as the engine's own answer. The answer's part is the last
``completion_tokens`` positions. An engine that refuses the field or answers without it (llama.cpp's
``n_probs`` scores only the tokens it generates, so it cannot score given ones) is "not available
on this engine", said once, and the gate decides on the structural checks.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from doctor.engines.names import display, engine_of_answers
from doctor.foundation import wire
from doctor.probes import payload as payloads
from doctor.probes.deadlines import RunDeadline
from doctor.probes.http import (
    BodyTooLarge,
    DeadlineExceeded,
    HttpOptions,
    bounded_get,
    bounded_request,
    error_kind,
    http_client,
    join_url,
    without_credentials,
)
from doctor.verify.answers import Answer, answer_from_response
from doctor.verify.prompts import Prompt, gate_body
from doctor.verify.scoring import TokenScores

#: The longest one answer may take: a 128-token answer on a slow CPU engine, not a hung one.
REQUEST_DEADLINE_S = 120.0
#: The largest answer kept (a 32 MiB answer is not an answer to these prompts).
MAX_ANSWER_BYTES = 4 * 1024 * 1024
#: A request that failed this close to the run's deadline was cut by it: its grant is rounded down to
#: the millisecond (``RunDeadline.grant``) and a timer may fire a little early.
CUT_SLACK_S = 0.05
#: What a request of the gate may fail with: the transport's errors, its own deadlines, an answer over ``MAX_ANSWER_BYTES``.
FAILURES = (httpx.HTTPError, OSError, TimeoutError, DeadlineExceeded, BodyTooLarge)


@dataclass
class Target:
    """One endpoint of the gate: its role, URL, the model it serves (``/v1/models``, or ``--model``),
    that model's ``max_model_len`` where ``/v1/models`` gives it (vLLM does), and the engine its
    answers name; ``error`` when it could not be asked at all."""

    role: str  # "baseline" or "candidate"
    url: str
    model: str | None = None
    engine: str | None = None
    error: str | None = None
    max_model_len: int | None = None
    identified: bool = False  # /v1/models was asked (``identify``)


@dataclass
class Gathered:
    """What the gate's requests brought back, per role: the answers per prompt (repeats in order),
    the teacher-forced scorings per prompt, and why a role could not score."""

    answers: dict[str, dict[str, list[Answer]]] = field(default_factory=dict)
    scores: dict[str, dict[str, list[TokenScores]]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    cut: dict[str, int] = field(default_factory=dict)  # role -> answers and scorings the run's deadline censored
    asked: dict[str, int] = field(default_factory=dict)  # role -> answers and scorings planned

    def deadline_note(self, deadline_s: float) -> str | None:
        """What the run's ``--deadline`` left unmeasured, per role; None when it left nothing."""
        cut = [f"{n} of the {role}'s {self.asked.get(role, n)} requests" for role, n in self.cut.items() if n]
        if not cut:
            return None
        return (f"the run's {deadline_s:g} s --deadline ran out: {' and '.join(cut)} were not measured (censored, "
                "not failed); the verdicts are on what was measured")


class Cut:
    """A request the run's deadline cut or left unsent: censored, neither an answer nor a failure of the endpoint."""


CUT = Cut()


class _Asker:
    """The requests of one gate run: one client, the run's deadline, the HTTP options."""

    def __init__(self, http: HttpOptions, deadline: RunDeadline) -> None:
        self.http = http
        self.deadline = deadline
        self.client = http_client(http.request_headers(), http.verify, http.timeout_s)

    def post(self, url: str, body: dict[str, Any]) -> tuple[int, Any, str]:
        """(status, parsed JSON or None, a short text of the answer); raises ``httpx.HTTPError`` and kin."""
        left = self.deadline.grant(REQUEST_DEADLINE_S)
        if left <= 0:
            raise TimeoutError(self.deadline.spent("the request"))
        response, text = bounded_request(self.client, "POST", url, deadline_s=left, json_body=body, max_bytes=MAX_ANSWER_BYTES)
        try:
            doc = wire.loads(text)
        except ValueError:
            doc = None
        return response.status_code, doc, text[:300]

    def identify(self, target: Target) -> None:
        """The model ``/v1/models`` lists first (unless ``--model`` named one), its ``max_model_len``, and the engine its answers name."""
        target.identified = True
        try:
            response, text = bounded_get(self.client, join_url(target.url, "/v1/models"), deadline_s=self.deadline.grant(self.http.timeout_s))
            data = wire.loads(text).get("data") if response.status_code == 200 else None
        except (*FAILURES, ValueError, AttributeError) as exc:
            target.error = f"{target.role} {without_credentials(target.url)}: /v1/models: {_failure(exc)}"
            return
        ids = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        if not ids:
            target.error = f"{target.role} {without_credentials(target.url)}: /v1/models answered HTTP {response.status_code} with no model"
            return
        target.model = target.model or str(ids[0].get("id"))
        served = next((m for m in ids if m.get("id") == target.model), ids[0])
        target.max_model_len = wire.number(served.get("max_model_len"), int)
        named = engine_of_answers(response.headers, [m.get("owned_by") for m in ids])
        target.engine = named[0] if named else None

    def censored(self) -> bool:
        """The run's deadline is (all but) spent: a request that failed now was cut by it, not by the endpoint."""
        return self.deadline.left() <= CUT_SLACK_S

    def ask(self, target: Target, prompt: Prompt) -> Answer | Cut:
        """``prompt``'s answer from ``target``, an answer whose ``error`` says what came instead, or ``CUT``
        when the run's deadline cut the request or left it unsent."""
        if target.error:
            return Answer(prompt.id, error=target.error)
        try:
            status, doc, text = self.post(join_url(target.url, payloads.ROUTES[prompt.route]), gate_body(prompt, target.model))
        except FAILURES as exc:
            return CUT if self.censored() else Answer(prompt.id, error=_failure(exc))
        if status != 200:
            return Answer(prompt.id, error=f"HTTP {status}: {text}")
        return answer_from_response(prompt.id, prompt.route, doc)

    def score(self, target: Target, prompt: Prompt, answer: Answer) -> TokenScores | str | Cut | None:
        """The answer's tokens as ``target`` scores them; a sentence when the engine cannot score; ``CUT``
        when the run's deadline cut it; None when this one request failed (or the answer has no text
        or length to score)."""
        if target.error or not answer.text or not answer.completion_tokens:
            return None
        body = teacher_forced_body(prompt, answer, target.model)
        try:
            status, doc, text = self.post(join_url(target.url, payloads.ROUTES[prompt.route]), body)
        except FAILURES:
            return CUT if self.censored() else None
        if status == 400:
            return f"not available on this engine ({display(target.engine)}: HTTP 400 {text[:160]})"
        if status != 200:
            return None
        return reference_scores(doc, prompt.route, answer.completion_tokens) or (
            f"not available on this engine ({display(target.engine)} answered without prompt_logprobs)")


def teacher_forced_body(prompt: Prompt, answer: Answer, model: str | None) -> dict[str, Any]:
    """The request that scores ``answer`` after ``prompt``: one token generated, every prompt token's log-probability.

    What constrains decoding (a schema, tools) is dropped: nothing is decoded but one token, and a
    grammar would only cost its compile.
    """
    body = payloads.unconstrained(gate_body(prompt, model))
    body.update(max_tokens=1, prompt_logprobs=0)
    if prompt.route == "completions":
        body["prompt"] = str(body["prompt"]) + answer.text
    else:
        body["messages"] = [*body["messages"], {"role": "assistant", "content": answer.text}]
        body.update(add_generation_prompt=False, continue_final_message=True)
    return body


def reference_scores(doc: Any, route: str, answer_tokens: int) -> TokenScores | None:
    """The last ``answer_tokens`` prompt positions of a ``prompt_logprobs`` answer (per choice on
    completions, top-level on chat, as vLLM places them); None when absent or malformed.

    Each position is ``{token_id: {"logprob", "rank", "decoded_token"}}``, the prompt's own token
    first (vLLM puts it before any top-k); the first position is ``null`` (nothing precedes it).
    """
    if not isinstance(doc, dict):
        return None
    choices = doc.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    positions = choice.get("prompt_logprobs") if route == "completions" else doc.get("prompt_logprobs")
    if not isinstance(positions, list) or len(positions) < 2:
        return None
    tokens: list[int] = []
    logprobs: list[float] = []
    for entry in positions[-answer_tokens:]:
        if not isinstance(entry, dict) or not entry:
            return None
        token, info = next(iter(entry.items()))
        tid = wire.number(token, int)
        value = wire.number(info.get("logprob"), float) if isinstance(info, dict) else None
        if tid is None or value is None:
            return None
        tokens.append(tid)
        logprobs.append(value)
    return TokenScores(tuple(tokens), tuple(logprobs))


def _failure(exc: BaseException) -> str:
    kind = "timeout" if isinstance(exc, TimeoutError) else error_kind(exc)
    return f"{kind}: {exc}" if str(exc) else kind


def identify(targets: list[Target], http: HttpOptions, deadline: RunDeadline) -> None:
    """Each target's model, ``max_model_len`` and engine, before ``gather`` (which then does not ask again):
    the long-context probe is built at the length ``/v1/models`` gives."""
    asker = _Asker(http, deadline)
    try:
        for target in targets:
            asker.identify(target)
    finally:
        asker.client.close()


def prompt_tokens(target: Target, prompts: list[Prompt], http: HttpOptions, deadline: RunDeadline) -> list[int | None]:
    """How many tokens ``target`` counts in each prompt (``usage.prompt_tokens`` of its answer, asked
    once; None where it gave none or failed): the long-context probe sizes its haystack by them."""
    asker = _Asker(http, deadline)
    try:
        if not target.identified:
            asker.identify(target)
        answers = [asker.ask(target, p) for p in prompts]
    finally:
        asker.client.close()
    return [a.prompt_tokens if isinstance(a, Answer) else None for a in answers]


def gather(targets: list[Target], prompts: list[Prompt], repeats: dict[str, int], references: Callable[[Gathered], dict[str, Answer]],
           http: HttpOptions, deadline: RunDeadline, *, workers: int = 4,
           progress: Callable[[str], None] = lambda _: None) -> Gathered:
    """Every target's answers (``repeats[role]`` each, interleaved prompt by prompt), then every
    target's scorings of the reference answers (``references`` picks them from the answers: the
    baseline's most common), as many scorings as answers. Never raises for what a target does."""
    asker = _Asker(http, deadline)
    out = Gathered()
    try:
        for target in targets:
            if not target.identified:
                asker.identify(target)
            out.answers[target.role] = {p.id: [] for p in prompts}
            out.scores[target.role] = {}
        jobs = [(t, p) for p in prompts for k in range(max(repeats.values(), default=0)) for t in targets if k < repeats.get(t.role, 0)]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for (target, prompt), answer in zip(jobs, pool.map(lambda job: asker.ask(*job), jobs), strict=True):
                out.asked[target.role] = out.asked.get(target.role, 0) + 1
                if isinstance(answer, Cut):
                    out.cut[target.role] = out.cut.get(target.role, 0) + 1
                else:
                    out.answers[target.role][prompt.id].append(answer)
            progress(f"answers: {len(jobs)} requests")
            reference = references(out)
            by_id = {p.id: p for p in prompts}
            scoring = [(t, by_id[pid], ref) for pid, ref in reference.items() for k in range(max(repeats.values(), default=0))
                       for t in targets if k < repeats.get(t.role, 0)]
            for (target, prompt, _), result in zip(scoring, pool.map(lambda job: asker.score(*job), scoring), strict=True):
                out.asked[target.role] = out.asked.get(target.role, 0) + 1
                if isinstance(result, Cut):
                    out.cut[target.role] = out.cut.get(target.role, 0) + 1
                elif isinstance(result, str):
                    out.unavailable.setdefault(target.role, result)
                elif result is not None:
                    out.scores[target.role].setdefault(prompt.id, []).append(result)
            progress(f"teacher-forced scoring: {len(scoring)} requests")
    finally:
        asker.client.close()
    return out
