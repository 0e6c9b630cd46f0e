"""Write a tiny random-weight Llama GGUF file that llama.cpp's ``llama-server`` can serve.

Run with the Python that has the ``gguf`` package (``.ci/llamacpp-setup`` makes one in
``.llamacpp/venv``): ``.llamacpp/venv/bin/python -m tests.llamacpp.tiny_model FILE``.

What llama.cpp's loader needs (``src/llama-vocab.cpp``, ``src/llama-model.cpp`` in the sdist):
a ``gpt2`` (byte-level BPE) vocabulary must come with ``tokenizer.ggml.merges`` and a known
pre-tokenizer (``gpt-2``); every byte must have a token, or text outside the merges cannot be
tokenized. So the vocabulary is the 256 byte-level characters, merges that make one token of
each word the probe's prompt uses (as the vLLM stage's tokenizer does, so ``--prompt-tokens N``
stays about N tokens; without merges the default prompt would be ~6 times longer), and the
special tokens. The llama architecture's hyperparameters and tensors are the ones
``llm_build_llama`` reads; weights are float32 (no slow half-precision path on an AVX2-only CPU).

Random weights decoded greedily fall into loops on one token; the output rows of the special
tokens and of the bytes that are not printable ASCII are zeroed, so every generated token is
visible text (half a UTF-8 character would stream as an empty delta) and end-of-sequence never
wins: each request generates exactly its ``max_tokens``. Weights are seeded: the same file
every time.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.realvllm.tiny_model import CHAT_TEMPLATE, WORDS, probe_words

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2
HIDDEN, LAYERS, HEADS, KV_HEADS, CONTEXT = 512, 6, 8, 4, 4096


def byte_chars() -> list[str]:
    """GPT-2's byte-level alphabet: byte ``i`` is written as character ``byte_chars()[i]``."""
    visible = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in visible:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def vocabulary() -> tuple[list[str], list[str], list[int]]:
    """The tokens, the merges and the ids of the tokens that may be generated."""
    alphabet = byte_chars()
    tokens = [*SPECIAL_TOKENS, *alphabet]
    merges: list[str] = []
    known = set(tokens)
    words = [*WORDS, *probe_words()]
    # Words after a space (" the" is "Ġthe") rank before bare words, so a word inside the prompt is
    # merged from its space on, left to right, into one token.
    for word in [alphabet[ord(" ")] + w for w in words] + words:
        token = word[0]
        for char in word[1:]:
            merged = token + char
            if merged not in known:
                known.add(merged)
                tokens.append(merged)
                merges.append(f"{token} {char}")
            token = merged
    printable = {alphabet[b] for b in (ord("\n"), *range(0x20, 0x7F))}
    offset = len(SPECIAL_TOKENS)
    visible = [i for i, t in enumerate(tokens) if i >= offset + 256 or (i >= offset and t in printable)]
    return tokens, merges, visible


def build(out: Path) -> Path:
    import gguf
    import numpy as np

    tokens, merges, visible = vocabulary()
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name("llm-doctor tiny llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(HIDDEN * 2)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL] * len(SPECIAL_TOKENS)
                           + [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIAL_TOKENS)))
    writer.add_token_merges(merges)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_chat_template(CHAT_TEMPLATE)

    rng = np.random.default_rng(0)

    def weight(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)

    head_dim, vocab = HIDDEN // HEADS, len(tokens)
    writer.add_tensor("token_embd.weight", weight(vocab, HIDDEN))
    for i in range(LAYERS):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(HEADS * head_dim, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(KV_HEADS * head_dim, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(KV_HEADS * head_dim, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(HIDDEN, HEADS * head_dim))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(HIDDEN * 2, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(HIDDEN * 2, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(HIDDEN, HIDDEN * 2))
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    output = np.zeros((vocab, HIDDEN), dtype=np.float32)
    output[visible] = weight(len(visible), HIDDEN)
    writer.add_tensor("output.weight", output)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
