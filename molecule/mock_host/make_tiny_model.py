"""Make the mock host's model: a tiny random-initialised Llama with a locally trained tokenizer.

Nothing is downloaded: the tokenizer is trained on documentation text that ships with Python
itself, and the weights come from a seeded random initialisation. vLLM loads it in seconds on
two CPU cores, which is all the mock host needs: real serving, real streaming, real n-gram
speculation, meaningless words.
"""

import argparse
import importlib
import json
import os
import pkgutil

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>"]
# A minimal chat template so that /v1/chat/completions works as on a real instruct model.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def stdlib_docstrings(limit):
    """Docstrings of the standard library: plain English, present on every Python install."""
    texts = []
    for info in sorted(pkgutil.iter_modules(), key=lambda item: item.name):
        if len(texts) >= limit or info.name.startswith("_") or "test" in info.name:
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - any module that fails to import is simply skipped
            continue
        for obj in [module] + [getattr(module, name, None) for name in dir(module)]:
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str) and len(doc) > 40:
                texts.append(doc)
    return texts


def train_tokenizer(vocab_size):
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(stdlib_docstrings(4000), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", chat_template=CHAT_TEMPLATE,
                                   model_max_length=2048)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="directory to write the model into")
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=20261129)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    tokenizer = train_tokenizer(args.vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False, torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    os.makedirs(args.output, exist_ok=True)
    model.save_pretrained(args.output, safe_serialization=True)
    tokenizer.save_pretrained(args.output)
    with open(os.path.join(args.output, "generation_config.json"), "w", encoding="utf-8") as handle:
        json.dump({"bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id}, handle)
    # The service runs as an unprivileged user; safetensors writes its file 0600.
    for name in os.listdir(args.output):
        os.chmod(os.path.join(args.output, name), 0o644)


if __name__ == "__main__":
    main()
