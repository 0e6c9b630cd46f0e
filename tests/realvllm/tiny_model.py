"""Make a tiny random-weight Llama model directory that vLLM can serve, with no hub download.

Run with the vLLM venv's Python (it has torch, transformers and tokenizers):
``.venv-vllm/bin/python -m tests.realvllm.tiny_model DIR``. The tokenizer is a byte-level BPE
trained here on generated text, with a chat template, so all three routes work. Weights are
seeded, so the same directory is produced every time.

Random weights decoded greedily (the probe asks for ``temperature: 0``) fall into loops on one
token. Two choices keep every generated token visible as text, as a real model's are: the
tokenizer's alphabet is printable ASCII and newline only (a byte-level token for half a UTF-8
character streams as an empty delta until its other half comes, which a loop never brings), and
the output rows of the special tokens are zeroed so they never win the argmax (vLLM skips them
in the text, so they would stream as empty deltas too).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WORDS = ["the", "a", "of", "to", "and", "in", "is", "it", "that", "for", "on", "with", "as", "was", "at", "by", "be", "this", "from", "or", "an", "are", "not", "but", "have", "latency", "token", "stream", "server", "gateway", "engine", "cache", "queue", "request", "response", "model", "prompt", "batch", "first", "last", "time", "fast", "slow", "wait", "run", "go", "stop", "read", "write", "send", "buffer", "proxy", "nginx", "vllm", "gpu", "cpu"]


def probe_words() -> list[str]:
    """The words of llm-doctor's default prompt, so that its ``--prompt-tokens N`` is about N tokens here.

    Without them in the corpus the tokenizer splits each into ~3 tokens, and the default
    256-token prompt becomes ~830: several seconds of prefill on a CPU before any first token.
    """
    from doctor.probes.payload import prompt_text

    return sorted(set(prompt_text(64, 0).split()[2:]) - set(WORDS))


def corpus(lines: int = 4000) -> list[str]:
    import random

    rnd = random.Random(0)
    words = WORDS + probe_words()
    return [" ".join(rnd.choice(words) for _ in range(rnd.randint(5, 30))) for _ in range(lines)]


SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]


CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def build(out: Path, hidden: int = 1024, layers: int = 8, heads: int = 16, kv_heads: int = 4) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # The byte-level characters of newline and printable ASCII, as the pre-tokenizer maps them.
    printable = "\n" + "".join(map(chr, range(0x20, 0x7F)))
    alphabet = list(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(printable)[0][0])
    trainer = trainers.BpeTrainer(vocab_size=2048, special_tokens=SPECIAL_TOKENS, initial_alphabet=alphabet)
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=4096,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
        torch_dtype="bfloat16", tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        model.lm_head.weight[fast.convert_tokens_to_ids(SPECIAL_TOKENS)] = 0
    model.save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    lora_adapters(out / "lora", hidden, layers, kv_heads * (hidden // heads))
    return out


#: The adapters written beside the model (``DIR/lora/NAME``), for the LoRA incident.
ADAPTERS = ("alpha", "beta")


def lora_adapters(out: Path, hidden: int, layers: int, kv_dim: int, rank: int = 8) -> None:
    """Rank-``rank`` LoRA adapters of seeded random weights on every layer's ``q_proj`` and ``v_proj``,
    in PEFT's layout (``adapter_config.json``, ``adapter_model.safetensors``), which ``vllm serve
    --lora-modules NAME=DIR`` loads. Their weights barely change the answers: what the incident needs
    is that they are distinct adapters, each taking a LoRA slot."""
    import torch
    from safetensors.torch import save_file

    for seed, name in enumerate(ADAPTERS, start=1):
        generator = torch.Generator().manual_seed(seed)
        weights = {}
        for layer in range(layers):
            for proj, width in (("q_proj", hidden), ("v_proj", kv_dim)):
                key = f"base_model.model.model.layers.{layer}.self_attn.{proj}"
                weights[f"{key}.lora_A.weight"] = torch.randn(rank, hidden, generator=generator) * 0.01
                weights[f"{key}.lora_B.weight"] = torch.randn(width, rank, generator=generator) * 0.01
        (out / name).mkdir(parents=True, exist_ok=True)
        save_file(weights, str(out / name / "adapter_model.safetensors"))
        (out / name / "adapter_config.json").write_text(json.dumps({
            "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank, "lora_dropout": 0.0,
            "target_modules": ["q_proj", "v_proj"], "bias": "none", "base_model_name_or_path": "tiny"}))


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
