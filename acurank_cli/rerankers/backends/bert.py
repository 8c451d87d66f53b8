"""A BERT encoder's forward pass (all-MiniLM-L6-v2's, for ``minilm``), read from the model folder's own files.

The weights come from ``model.safetensors`` (the ``safetensors`` library), the tokens from ``tokenizer.json`` (the
``tokenizers`` library, the Rust tokenizer transformers itself wraps), and the forward pass is transformers'
``BertModel`` (5.x, ``sdpa`` attention, inference) written out in torch's functional ops, in the same order:
embeddings (word + token type, then + position) and LayerNorm; per layer, q/k/v projections, scaled dot-product
attention with the padding mask as a boolean (batch, 1, length, length) tensor (no mask when nothing is padded),
the output projection added to its input and normalised, GELU (erf) feed-forward added and normalised.

Why not ``transformers.AutoModel``: importing its modelling stack (``torch.distributed.tensor``, ``torch._dynamo``,
sympy, ``scipy.optimize`` for its losses) costs about 4.5 s of CPU in every process that loads this 22 M-parameter
encoder, more than the model itself; a CLI pays that on every run. transformers stays the reference:
``tests/rerankers/test_bert_encoder.py`` compares the hidden states of both bit for bit, and the token ids of both
tokenizers, on the sample passages, queries and odd text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InputError

WHAT_WE_COMPUTE = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}


@dataclass(frozen=True)
class BertShape:
    """What the forward pass needs from ``config.json``."""

    layers: int
    heads: int
    hidden: int
    eps: float
    positions: int

    @classmethod
    def read(cls, folder: Path) -> "BertShape":
        """The folder's ``config.json``; one that asks for anything this forward pass does not compute is refused."""
        path = folder / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        for key, value in WHAT_WE_COMPUTE.items():
            if config.get(key, value) != value:
                raise InputError(f"{path}: {key} is {config.get(key)!r}; the BERT encoder computes {value!r} only")
        if config.get("is_decoder") or config.get("add_cross_attention"):
            raise InputError(f"{path}: a decoder; the BERT encoder computes a bidirectional encoder only")
        return cls(layers=int(config["num_hidden_layers"]), heads=int(config["num_attention_heads"]),
                   hidden=int(config["hidden_size"]), eps=float(config["layer_norm_eps"]),
                   positions=int(config["max_position_embeddings"]))


class BertTokenizer:
    """``tokenizer.json`` through ``tokenizers``: at most ``max_tokens`` tokens a text, padded to the batch's longest."""

    def __init__(self, folder: Path, max_tokens: int):
        import torch
        from tokenizers import Tokenizer

        self._torch = torch
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_tokens)
        pad = self._tokenizer.token_to_id("[PAD]")
        self._tokenizer.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")

    def __call__(self, texts: list[str]) -> dict[str, Any]:
        """``input_ids``, ``token_type_ids`` and ``attention_mask`` as (batch, length) int64 tensors."""
        encodings = self._tokenizer.encode_batch(texts)
        tensor = self._torch.tensor
        return {"input_ids": tensor([e.ids for e in encodings]),
                "token_type_ids": tensor([e.type_ids for e in encodings]),
                "attention_mask": tensor([e.attention_mask for e in encodings])}


class BertEncoder:
    """The encoder's last hidden state for a tokenised batch (call it under ``torch.inference_mode()``)."""

    def __init__(self, folder: Path, device: Any):
        import torch
        from safetensors.torch import load_file

        self._torch = torch
        self.shape = BertShape.read(folder)
        self.weights = load_file(str(folder / "model.safetensors"), device=str(device))
        self._positions = torch.arange(self.shape.positions, device=device)[None, :]

    def parameters(self) -> int:
        """Every weight in the file (the pooler's too, as transformers counts them); not the position-id buffer."""
        return sum(t.numel() for name, t in self.weights.items() if t.is_floating_point())

    def _linear(self, x, name: str):
        return self._torch.nn.functional.linear(x, self.weights[name + ".weight"], self.weights[name + ".bias"])

    def _norm(self, x, name: str):
        hidden = (self.shape.hidden,)
        return self._torch.nn.functional.layer_norm(x, hidden, self.weights[name + ".weight"],
                                                    self.weights[name + ".bias"], self.shape.eps)

    def _embed(self, input_ids, token_type_ids):
        embedding, w = self._torch.nn.functional.embedding, self.weights
        x = embedding(input_ids, w["embeddings.word_embeddings.weight"])
        x = x + embedding(token_type_ids, w["embeddings.token_type_embeddings.weight"])
        x = x + embedding(self._positions[:, : input_ids.shape[1]], w["embeddings.position_embeddings.weight"])
        return self._norm(x, "embeddings.LayerNorm")

    def _layer(self, x, mask, prefix: str):
        functional = self._torch.nn.functional
        batch, length, _ = x.shape
        head = self.shape.hidden // self.shape.heads
        q, k, v = (self._linear(x, f"{prefix}attention.self.{n}").view(batch, length, -1, head).transpose(1, 2)
                   for n in ("query", "key", "value"))
        attended = functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=head ** -0.5,
                                                           is_causal=False)
        attended = attended.transpose(1, 2).contiguous().reshape(batch, length, -1).contiguous()
        x = self._norm(self._linear(attended, f"{prefix}attention.output.dense") + x, f"{prefix}attention.output.LayerNorm")
        inner = functional.gelu(self._linear(x, f"{prefix}intermediate.dense"))
        return self._norm(self._linear(inner, f"{prefix}output.dense") + x, f"{prefix}output.LayerNorm")

    def __call__(self, input_ids, token_type_ids, attention_mask):
        """(batch, length, hidden) float tensor: the last layer's output for every token, padding included."""
        batch, length = input_ids.shape
        mask = None
        if not bool(attention_mask.all()):
            mask = attention_mask.bool()[:, None, None, :].expand(batch, 1, length, length).contiguous()
        x = self._embed(input_ids, token_type_ids)
        for i in range(self.shape.layers):
            x = self._layer(x, mask, f"encoder.layer.{i}.")
        return x


__all__ = ["BertEncoder", "BertShape", "BertTokenizer"]
