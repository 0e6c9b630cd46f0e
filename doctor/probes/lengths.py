"""Per-request prompt and output lengths: fixed, uniform over a range, or real request shapes.

A load test with one fixed prompt length measures one point of the engine's cost curve; real
traffic mixes short and long prompts, and long ones are what interfere with decoding streams.
``llm-doctor load --prompt-tokens 128:2048`` draws each request's length uniformly, and
``--shapes FILE`` replays the lengths of real requests (JSON Lines, one
``{"prompt_tokens": N, "max_tokens": M}`` per line, as an application's access log gives them).

Draws are seeded by the request's index, so a rerun, and both paths of a pair, send the same
lengths: runs stay comparable and the pair stays a pair.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from doctor.foundation import wire

#: Shapes read from a file at most: a replay of this many distinct requests is plenty for a load
#: test, and a huge file must not be held in memory whole.
MAX_SHAPES = 100_000
#: The longest prompt or answer a run asks for, in tokens: 2**20, above the context of the models
#: served today. The prompt is built in memory and sent whole, so 10**8 tokens would cost
#: gigabytes before the first byte is sent (``doctor.settings`` refuses more).
MAX_TOKENS = 1 << 20


@dataclass(frozen=True)
class Lengths:
    """How long each request's prompt and answer are; ``fixed`` prompt and ``max_tokens`` by default."""

    prompt_tokens: int = 256
    max_tokens: int = 64
    prompt_high: int | None = None  # uniform over [prompt_tokens, prompt_high] when set
    max_tokens_high: int | None = None  # uniform over [max_tokens, max_tokens_high] when set
    shapes: tuple[tuple[int, int], ...] = field(default_factory=tuple)  # (prompt, max_tokens) replayed in turn
    source: str | None = None  # the --shapes file

    def for_index(self, index: int) -> tuple[int, int]:
        """(prompt tokens, max tokens) of request ``index``: the same for the same index, always."""
        if self.shapes:
            return self.shapes[index % len(self.shapes)]
        rng = random.Random(index)
        prompt = rng.randint(self.prompt_tokens, self.prompt_high) if self.prompt_high else self.prompt_tokens
        out = rng.randint(self.max_tokens, self.max_tokens_high) if self.max_tokens_high else self.max_tokens
        return prompt, out

    def describe(self) -> str:
        """For the run record: two runs with different descriptions are unlike."""
        if self.shapes:
            return f"shapes:{self.source} ({len(self.shapes)})"
        prompt = f"{self.prompt_tokens}:{self.prompt_high}" if self.prompt_high else str(self.prompt_tokens)
        out = f"{self.max_tokens}:{self.max_tokens_high}" if self.max_tokens_high else str(self.max_tokens)
        return f"prompt {prompt}, output {out}"

    @property
    def varies(self) -> bool:
        return bool(self.shapes or self.prompt_high or self.max_tokens_high)


def parse_range(text: str, flag: str) -> tuple[int, int | None]:
    """``"512"`` -> (512, None); ``"128:2048"`` -> (128, 2048). Raises ``ValueError`` naming ``flag``."""
    low, sep, high = str(text).partition(":")
    try:
        lo, hi = int(low), int(high) if sep else None
    except ValueError:
        raise ValueError(f"{flag} expects N or LOW:HIGH (whole numbers), got {text!r}") from None
    if lo < 1 or (hi is not None and hi < lo) or max(lo, hi or lo) > MAX_TOKENS:
        raise ValueError(f"{flag} expects N or LOW:HIGH with 1 <= LOW <= HIGH <= {MAX_TOKENS}, got {text!r}")
    return lo, None if hi == lo else hi


def read_shapes(path: Path) -> tuple[tuple[int, int], ...]:
    """The (prompt_tokens, max_tokens) of each line of a JSON Lines file; ``ValueError`` on a bad line."""
    shapes: list[tuple[int, int]] = []
    try:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = wire.loads(line)
                    prompt, out = int(row["prompt_tokens"]), int(row["max_tokens"])
                except (wire.WireError, LookupError, TypeError, ValueError):
                    raise ValueError(f"--shapes {path} line {number}: expected "
                                     '{"prompt_tokens": N, "max_tokens": M}') from None
                if not (1 <= prompt <= MAX_TOKENS and 1 <= out <= MAX_TOKENS):
                    raise ValueError(f"--shapes {path} line {number}: lengths must be between 1 and {MAX_TOKENS}")
                shapes.append((prompt, out))
                if len(shapes) >= MAX_SHAPES:
                    break
    except OSError as exc:
        raise ValueError(f"cannot read --shapes {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"--shapes {path} is not UTF-8 text") from None
    if not shapes:
        raise ValueError(f"--shapes {path} holds no request shape")
    return tuple(shapes)
