"""A small model of vLLM V1's scheduler: the lab's symptoms come from here, not from flags.

One engine step schedules a token budget (``max_num_batched_tokens``) across requests, running
ones first (decodes take one token each, unfinished prefills take a chunk), then admits waiting
ones while ``max_num_seqs`` and the KV cache allow. KV is allocated in blocks of ``block_size``
tokens as sequences grow; when a running sequence cannot get a block, the lowest-priority running
request (the last admitted) is preempted by recompute: its blocks are freed, it goes back to the
head of the waiting queue and redoes its prefill (prompt and tokens generated so far) later.
With prefix caching, full blocks are hashed by content and a new request reuses the blocks of a
matching prefix instead of computing them.

Everything is pure: ``schedule`` and ``complete`` take the time as an argument and never sleep;
``step_seconds`` says how long the step costs so that the engine loop can sleep it in real time.
Scenario costs are scaled so a run takes seconds, not minutes.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from doctor.lab.text import output_word

FINISHED_LENGTH = "length"


@dataclass
class EngineConfig:
    """The engine's settings: vLLM's names where vLLM has one, cost knobs for the model."""

    model: str = "lab/llama-3-8b-instruct"
    max_model_len: int = 8192
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    kv_cache_tokens: int = 131072  # "GPU KV cache size: N tokens"
    block_size: int = 16
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    stream_interval: int = 1
    gpu_memory_utilization: float = 0.9  # reported (log, cache_config_info); kv_cache_tokens sizes the cache
    # Costs, in (scaled) seconds: a step costs base + per scheduled sequence + per prefill token.
    step_base_s: float = 0.010
    decode_s_per_seq: float = 0.0005
    prefill_s_per_token: float = 0.00002
    stats_interval_s: float = 1.0  # the periodic "Engine 000: Avg prompt throughput" line

    def __post_init__(self) -> None:
        if self.kv_cache_tokens < self.max_model_len:
            # vLLM refuses to start in this case; so does the lab.
            raise ValueError(
                f"The model's max seq len ({self.max_model_len}) is larger than the maximum number of "
                f"tokens that can be stored in KV cache ({self.kv_cache_tokens})."
            )
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.max_model_len:
            # Also refused by vLLM: a prompt longer than one step's budget could never be scheduled.
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) is smaller than max_model_len "
                f"({self.max_model_len}) and chunked prefill is disabled."
            )
        if min(self.max_num_seqs, self.max_num_batched_tokens, self.block_size, self.stream_interval) < 1:
            raise ValueError("max_num_seqs, max_num_batched_tokens, block_size and stream_interval must be >= 1")

    @property
    def num_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size

    def non_default_args(self) -> dict[str, Any]:
        """The ``vllm serve`` flags this engine is "started" with, as vLLM logs ``non-default args``.

        The sizing flags are always listed (an operator sizing a deployment passes them); the
        others only when they differ from vLLM's defaults.
        """
        args: dict[str, Any] = {
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "gpu_memory_utilization": self.gpu_memory_utilization,
        }
        vllm_defaults = {
            "block_size": 16,
            "enable_prefix_caching": True,
            "enable_chunked_prefill": True,
            "stream_interval": 1,
        }
        args.update({k: getattr(self, k) for k, v in vllm_defaults.items() if getattr(self, k) != v})
        return args


WAITING, RUNNING, FINISHED = "waiting", "running", "finished"


@dataclass(eq=False)
class Sequence:
    """One request inside the scheduler, with the timestamps the metrics need."""

    request_id: str
    prompt_ids: list[int]
    max_tokens: int
    arrival: float
    seed: int = 0
    output: list[str] = field(default_factory=list)
    num_computed: int = 0
    blocks: list[int] = field(default_factory=list)
    status: str = WAITING
    first_scheduled: float | None = None
    prefill_started: bool = False
    first_token_t: float | None = None
    last_token_t: float | None = None
    finished_t: float | None = None
    finish_reason: str | None = None
    num_preemptions: int = 0
    unreported_preemptions: int = 0  # reported with the next output, as V1's frontend sees them
    cached_prompt_tokens: int = 0

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output)

    def token_ids(self) -> list[int]:
        # Generated tokens get ids from (seed, position): enough to hash blocks after a preemption.
        return self.prompt_ids + [hash((self.seed, i)) for i in range(len(self.output))]


@dataclass
class Output:
    """What one step produced for one sequence."""

    seq: Sequence
    new_text: list[str]
    first_chunk_done: bool  # its first prefill chunk completed in this step
    finished: bool
    previous_token_t: float | None = None  # when the sequence's previous token came (None: none yet)


@dataclass
class Batch:
    """One step's work: sequence -> tokens scheduled, and who was preempted to make room."""

    scheduled: dict[Sequence, int] = field(default_factory=dict)
    preempted: list[Sequence] = field(default_factory=list)
    admitted: list[Sequence] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(self.scheduled.values())


class BlockPool:
    """KV blocks with reference counts; freed blocks keep their hash (evictable prefix cache)."""

    def __init__(self, num_blocks: int, caching: bool) -> None:
        self.num_blocks = num_blocks
        self.caching = caching
        self._ref = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._cached: dict[int, int] = {}
        self._free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))

    @property
    def num_free(self) -> int:
        return len(self._free)

    def usage(self) -> float:
        return 1.0 - len(self._free) / self.num_blocks

    def take(self, n: int) -> list[int]:
        ids = []
        for _ in range(n):
            block, _ = self._free.popitem(last=False)  # least recently freed first
            old = self._hash[block]
            if old is not None and self._cached.get(old) == block:
                del self._cached[old]
            self._hash[block] = None
            self._ref[block] = 1
            ids.append(block)
        return ids

    def share(self, ids: list[int]) -> None:
        for block in ids:
            if self._ref[block] == 0:
                del self._free[block]
            self._ref[block] += 1

    def release(self, ids: list[int]) -> None:
        for block in reversed(ids):  # tail blocks are evicted first, as in vLLM
            self._ref[block] -= 1
            if self._ref[block] == 0:
                self._free[block] = None

    def num_free_among(self, ids: list[int]) -> int:
        """How many of ``ids`` sit in the free queue (cached but evictable)."""
        return sum(1 for block in ids if self._ref[block] == 0)

    def register(self, block: int, block_hash: int) -> None:
        if self.caching and self._hash[block] is None and block_hash not in self._cached:
            self._cached[block_hash] = block
            self._hash[block] = block_hash

    def lookup(self, hashes: list[int]) -> list[int]:
        hits = []
        for block_hash in hashes:
            block = self._cached.get(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits


def block_hashes(token_ids: list[int], block_size: int, upto: int) -> list[int]:
    """Chained hashes of the full blocks among the first ``upto`` tokens."""
    out: list[int] = []
    parent = 0
    for start in range(0, upto - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        out.append(parent)
    return out


@dataclass
class Counters:
    """Monotonic engine counters, read by the metrics and the stats log line."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0


class Scheduler:
    """The lab engine's scheduler state: waiting and running sequences, the block pool and the counters;
    ``schedule`` and ``complete`` are one engine step, pure, as the module docstring describes.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.pool = BlockPool(config.num_blocks, config.enable_prefix_caching)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.counters = Counters()

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def abort(self, seq: Sequence) -> None:
        """The client went away: drop the sequence and free its blocks."""
        if seq.status == RUNNING:
            self.running.remove(seq)
        elif seq.status == WAITING and seq in self.waiting:
            self.waiting.remove(seq)
        self.pool.release(seq.blocks)
        seq.blocks = []
        seq.status = FINISHED
        seq.finish_reason = "abort"

    # -- one step ----------------------------------------------------------------------------

    def schedule(self, now: float) -> Batch:
        batch = Batch()
        budget = self.config.max_num_batched_tokens
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            if not self._grow(seq, seq.num_computed + n, batch):
                break  # seq itself was preempted; everything after it too
            batch.scheduled[seq] = n
            budget -= n
            i += 1
        if not batch.preempted:
            self._admit(batch, budget, now)
        return batch

    def step_seconds(self, batch: Batch) -> float:
        cfg = self.config
        decodes = sum(1 for s, n in batch.scheduled.items() if n == 1 and s.num_computed >= len(s.prompt_ids))
        prefill_tokens = batch.num_tokens - decodes
        return cfg.step_base_s + cfg.decode_s_per_seq * len(batch.scheduled) + cfg.prefill_s_per_token * prefill_tokens

    def complete(self, batch: Batch, now: float) -> list[Output]:
        """Apply the step's results: advance computed tokens, sample one token where caught up."""
        outputs: list[Output] = []
        bs = self.config.block_size
        for seq, n in batch.scheduled.items():
            if seq.status != RUNNING:
                continue
            before = seq.num_computed
            seq.num_computed += n
            if self.pool.caching and seq.num_computed // bs > before // bs:
                hashes = block_hashes(seq.token_ids(), bs, seq.num_computed)
                for j in range(before // bs, len(hashes)):
                    self.pool.register(seq.blocks[j], hashes[j])
            first_chunk = not seq.prefill_started
            seq.prefill_started = True
            new_text: list[str] = []
            previous = seq.last_token_t
            if seq.num_computed == seq.num_tokens:
                if seq.first_token_t is None:
                    self.counters.prompt_tokens += len(seq.prompt_ids)
                    self.counters.cached_prompt_tokens += seq.cached_prompt_tokens
                new_text.append(output_word(seq.seed, len(seq.output)))
                seq.output.append(new_text[-1])
                self.counters.generation_tokens += 1
                if seq.first_token_t is None:
                    seq.first_token_t = now
                seq.last_token_t = now
                # V1's frontend learns of a preemption with the request's next output, so the
                # counter moves when the preempted request resumes, not while it stalls.
                self.counters.preemptions += seq.unreported_preemptions
                seq.unreported_preemptions = 0
            finished = len(seq.output) >= seq.max_tokens
            if finished:
                self._finish(seq, now)
            if new_text or first_chunk or finished:
                outputs.append(Output(seq, new_text, first_chunk, finished, previous))
        return outputs

    # -- internals ---------------------------------------------------------------------------

    def _grow(self, seq: Sequence, tokens: int, batch: Batch) -> bool:
        """Give ``seq`` blocks for ``tokens`` tokens, preempting from the back; False if seq went."""
        need = math.ceil(tokens / self.config.block_size) - len(seq.blocks)
        while need > self.pool.num_free:
            victim = self.running.pop()
            self._preempt(victim, batch)
            if victim is seq:
                return False
        if need > 0:
            seq.blocks += self.pool.take(need)
        return True

    def _preempt(self, seq: Sequence, batch: Batch) -> None:
        self.pool.release(seq.blocks)
        seq.blocks = []
        seq.num_computed = 0
        seq.status = WAITING
        seq.num_preemptions += 1
        seq.unreported_preemptions += 1
        batch.scheduled.pop(seq, None)
        batch.preempted.append(seq)
        self.waiting.appendleft(seq)

    def _admit(self, batch: Batch, budget: int, now: float) -> None:
        cfg = self.config
        while self.waiting and len(self.running) < cfg.max_num_seqs and budget > 0:
            seq = self.waiting[0]
            tokens = seq.token_ids()
            hit_blocks: list[int] = []
            if self.pool.caching:
                usable = (len(tokens) - 1) // cfg.block_size  # at least one token is computed
                hit_blocks = self.pool.lookup(block_hashes(tokens, cfg.block_size, len(tokens))[:usable])
            hit = len(hit_blocks) * cfg.block_size
            n = len(tokens) - hit
            if n > budget and not cfg.enable_chunked_prefill:
                break
            n = min(n, budget)
            need = math.ceil((hit + n) / cfg.block_size) - len(hit_blocks)
            if need > self.pool.num_free - self.pool.num_free_among(hit_blocks):
                break
            self.waiting.popleft()
            self.pool.share(hit_blocks)
            seq.blocks = hit_blocks + self.pool.take(need)
            seq.num_computed = hit
            seq.status = RUNNING
            if seq.first_scheduled is None:
                seq.first_scheduled = now
                seq.cached_prompt_tokens = hit
            self.counters.prefix_queries += len(tokens)
            self.counters.prefix_hits += hit
            self.running.append(seq)
            batch.scheduled[seq] = n
            batch.admitted.append(seq)
            budget -= n

    def _finish(self, seq: Sequence, now: float) -> None:
        self.running.remove(seq)
        self.pool.release(seq.blocks)
        seq.blocks = []
        seq.status = FINISHED
        seq.finish_reason = FINISHED_LENGTH
        seq.finished_t = now
