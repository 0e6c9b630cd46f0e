"""Recorded answers (``--save-answers``, ``--baseline-answers``): a baseline's side of the gate, kept.

JSONL, one line per answer, with the teacher-forced scoring of the same index where there was
one, after a header line (``RECORD_VERSION``, the model and engine, why scoring was unavailable).
A recorded baseline then stands in for a live one: its repeats are its floor, its scorings the
reference log-probabilities, so the candidate alone is asked. The answers carry no secret: they
are what the endpoint said to the gate's own prompts (a ``--prompts`` file's answers are the user's
own to keep or not).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from doctor.foundation import wire
from doctor.verify.answers import Answer, answer_from_json
from doctor.verify.scoring import TokenScores

RECORD_VERSION = 1


@dataclass
class Recorded:
    """One endpoint's answers and scorings per prompt, as ``doctor.probes.answers.Gathered`` keeps a role's."""

    answers: dict[str, list[Answer]] = field(default_factory=dict)
    scores: dict[str, list[TokenScores]] = field(default_factory=dict)
    model: str | None = None
    engine: str | None = None
    unavailable: str | None = None


def dump(recorded: Recorded) -> str:
    """The JSONL text of ``recorded``."""
    head = {"llm_doctor_answers": RECORD_VERSION, "model": recorded.model, "engine": recorded.engine,
            "unavailable": recorded.unavailable}
    lines = [json.dumps(head)]
    for pid, answers in recorded.answers.items():
        scores = recorded.scores.get(pid, [])
        for i, answer in enumerate(answers):
            lines.append(json.dumps({**answer.to_json(), "score": scores[i].to_json() if i < len(scores) else None}))
    return "\n".join(lines) + "\n"


def load(text: str, source: str) -> Recorded:
    """Recorded answers from their JSONL text; ``ValueError`` naming the line that is not one."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ValueError(f"{source}: empty")
    out = Recorded()
    for number, line in lines:
        where = f"{source}:{number}"
        try:
            doc = wire.loads(line)
        except ValueError as exc:
            raise ValueError(f"{where}: not JSON ({exc})") from None
        if isinstance(doc, dict) and "llm_doctor_answers" in doc:
            if doc["llm_doctor_answers"] != RECORD_VERSION:
                raise ValueError(f"{where}: recorded by another version (format {doc['llm_doctor_answers']!r}, this one reads {RECORD_VERSION})")
            out.model, out.engine, out.unavailable = (doc.get(k) if isinstance(doc.get(k), str) else None
                                                      for k in ("model", "engine", "unavailable"))
            continue
        answer = answer_from_json(doc, where)
        out.answers.setdefault(answer.prompt_id, []).append(answer)
        score = doc.get("score")
        if isinstance(score, dict):
            tokens, logprobs = score.get("tokens"), score.get("logprobs")
            ids = [i for t in tokens if (i := wire.number(t, int)) is not None] if isinstance(tokens, list) else []
            values = [v for x in logprobs if (v := wire.number(x, float)) is not None] if isinstance(logprobs, list) else []
            if not isinstance(tokens, list) or not isinstance(logprobs, list) or not len(ids) == len(values) == len(tokens) == len(logprobs):
                raise ValueError(f"{where}: 'score' is not a list of token ids and as many log-probabilities")
            out.scores.setdefault(answer.prompt_id, []).append(TokenScores(tuple(ids), tuple(values)))
    return out
