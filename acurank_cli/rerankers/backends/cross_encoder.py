"""``ce:MODEL``: a pointwise cross-encoder behind the listwise contract (``pip install 'acurank[ce]'``).

MODEL is a sentence-transformers ``CrossEncoder`` (BGE, Jina, mxbai, ms-marco-MiniLM, ...): a local folder
or a hub id (downloaded once into the Hugging Face cache). A window is ordered by the pair scores
s(query, passage), descending, ties in presented order. A pair's score does not depend on the window, so
pair scores are kept in memory and on disk beside the call cache (``calls.embeddings.sqlite``, keyed by the
model's identity and the digest of the pair): every method over the same pairs scores each once.
All unscored pairs of a batch of windows go to the model together, in forward batches of ``--batch-size``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ...errors import InputError, OptionError
from ...params import Option, at_least
from ...records import ParseStatus, RerankRequest, RerankResult
from ..backend import LRU, RerankerBase, register
from .embeddings import StoreUser
from .minilm import passage_text
from ..option_groups import TorchOptions


def pair_key(query: str, passage: str) -> str:
    """The store's text for a (query, passage) pair (unambiguous: JSON of the two)."""
    return json.dumps([query, passage], ensure_ascii=False, separators=(",", ":"))


class CrossEncoderReranker(StoreUser, RerankerBase):
    """Orders a window by a cross-encoder's (query, passage) scores."""


    def __init__(self, model: str, options: "CrossEncoderOptions | None" = None):
        options = options or CrossEncoderOptions()
        try:
            import torch  # noqa: F401 - needed, checked here
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise InputError(f"ce: needs sentence-transformers and torch (pip install 'acurank[ce]'): {exc}") from None
        device = str(options.torch_device())
        from .checkpoints import hub_kwargs, offline_note, one_line, quiet_loading

        try:
            with quiet_loading():
                self.model = CrossEncoder(model, device=device, **hub_kwargs(model))
        except Exception as exc:  # noqa: BLE001 - OSError (not found / offline hub), ValueError, ...
            raise InputError(f"ce:{model}: cannot load the cross-encoder{offline_note(model)}: {one_line(exc)}") from None
        limit = int(getattr(self.model.config, "max_position_embeddings", 512) or 512)
        if options.max_length is not None and options.max_length > limit:
            raise OptionError(f"{{max_length}}: ce:{OptionError.literal(model)} has {limit} positions",
                              max_length=("--max-length", options.max_length))
        self.max_length = options.max_length or min(512, limit)
        self.model.max_seq_length = self.max_length
        self.model_name = model
        self.files = self._identity_files()  # read once: the identity is asked for several times at start
        self.name = f"ce:{model}"
        self.batch_size = int(options.batch_size)
        self._scores: LRU = LRU(int(options.score_cache_size))  # pair text -> (score, tokens)
        self.scored = 0  # pairs run through the model so far
        self.forward_passes = 0

    def _identity_files(self) -> str:
        """A digest of the model folder's config and weights' sizes (a local model's identity), or the hub id."""
        folder = Path(self.model_name)
        if not folder.is_dir():
            return self.model_name
        h = hashlib.sha256()
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                h.update(f"{p.relative_to(folder)}:{p.stat().st_size}".encode())
                if p.suffix == ".json":
                    h.update(p.read_bytes())
        return h.hexdigest()[:16]

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": "ce", "model": self.model_name, "files": self.files,
                "max_length": self.max_length, "activation": "identity (raw logit)", "order": "score desc, ties by position"}

    def prompt_key(self, request: RerankRequest) -> str:
        return json.dumps([request.query, [passage_text(d) for d in request.docs]], ensure_ascii=False,
                          separators=(",", ":"))

    def parameters(self) -> int | None:
        return int(sum(p.numel() for p in self.model.model.parameters()))

    def _tokens(self, pairs: list[tuple[str, str]]) -> list[int]:
        return pair_tokens(self.model.tokenizer, pairs, self.max_length)

    def window_tokens(self, request: RerankRequest) -> tuple[int, int]:
        """A call's tokens with no call (the API's bill): each (query, passage) pair's, as a call counts them."""
        return sum(self._tokens([(request.query, passage_text(d)) for d in request.docs])), 0

    def score(self, pairs: Sequence[tuple[str, str]]) -> dict[str, tuple[float, int]]:
        """(score, tokens) per distinct pair, scoring only the pairs not in memory or in the store."""
        import numpy as np

        found: dict[str, tuple[float, int]] = {}
        missing: dict[str, tuple[str, str]] = {}
        for q, p in pairs:
            key = pair_key(q, p)
            hit = self._scores.touch(key)
            if hit is not None:
                found[key] = hit
            elif key not in missing:
                missing[key] = (q, p)
        if missing and self.store is not None:
            for key, (vec, n) in self.store.get_many(list(missing)).items():
                found[key] = (float(vec[0]), n)
                self._scores.put(key, found[key])
                del missing[key]
        if missing:
            keys = list(missing)
            todo = [missing[k] for k in keys]
            import torch

            scores = self.model.predict(todo, batch_size=self.batch_size, show_progress_bar=False,
                                        convert_to_numpy=True, activation_fn=torch.nn.Identity())
            scores = np.asarray(scores, dtype=np.float32).reshape(len(todo), -1)[:, 0]
            tokens = self._tokens(todo)
            new = {k: (float(s), n) for k, s, n in zip(keys, scores, tokens)}
            for k, v in new.items():
                self._scores.put(k, v)
            if self.store is not None:
                self.store.put_many({k: (np.array([s], dtype=np.float32), n) for k, (s, n) in new.items()})
            found.update(new)
            self.scored += len(todo)
            self.forward_passes += -(-len(todo) // self.batch_size)
        return found

    def rerank_batch(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:
        t0 = time.perf_counter()
        texts = [[passage_text(d) for d in r.docs] for r in requests]
        scored = self.score([(r.query, t) for r, ts in zip(requests, texts) for t in ts])
        share = (time.perf_counter() - t0) / max(1, len(requests))
        out = []
        for r, ts in zip(requests, texts):
            values = [scored[pair_key(r.query, t)] for t in ts]
            order = tuple(sorted(range(len(values)), key=lambda i: (-values[i][0], i)))
            raw = " ".join(f"{s:.4f}" for s, _ in values)
            out.append(RerankResult(order=order, input_tokens=sum(n for _, n in values), output_tokens=0,
                                    latency=share, parse=ParseStatus.ok, cached=False, raw=raw, backend=self.name,
                                    absolute=tuple(float(s) for s, _ in values)))
        return out


def pair_tokens(tokenizer: Any, pairs: Sequence[tuple[str, str]], max_length: int) -> list[int]:
    """Each (query, passage) pair's tokens as the cross-encoder reads it (truncated at ``max_length``)."""
    enc = tokenizer([q for q, _ in pairs], [p for _, p in pairs], truncation=True, max_length=max_length)
    return [len(ids) for ids in enc["input_ids"]]


class CrossEncoderCounts(RerankerBase):
    """ce:MODEL without its weights (``--dry-run``'s bill, :attr:`~..backend.BackendSpec.counts`): its tokenizer and
    config only, the pair length as the model would take it."""

    def __init__(self, model: str, options: "CrossEncoderOptions"):
        from .checkpoints import hub_kwargs, offline_note, one_line, quiet_loading

        try:
            from transformers import AutoConfig, AutoTokenizer

            with quiet_loading():
                self.tokenizer = AutoTokenizer.from_pretrained(model, **hub_kwargs(model))
                limit = int(getattr(AutoConfig.from_pretrained(model, **hub_kwargs(model)), "max_position_embeddings",
                                    512) or 512)
        except Exception as exc:  # noqa: BLE001 - OSError (not found / offline hub), ValueError, ...
            raise InputError(f"ce:{model}: cannot read the cross-encoder's tokenizer{offline_note(model)}: "
                             f"{one_line(exc)}") from None
        self.max_length = options.max_length or min(512, limit)  # as the model takes it (a larger one: refused there)
        self.name = f"ce:{model}"

    def window_tokens(self, request: RerankRequest) -> tuple[int, int]:
        return sum(pair_tokens(self.tokenizer, [(request.query, passage_text(d)) for d in request.docs],
                               self.max_length)), 0

    def rerank_batch(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:  # pragma: no cover
        raise RuntimeError("the cross-encoder's token counter ranks nothing: it has no weights")


@dataclass(frozen=True)
class CrossEncoderOptions(TorchOptions):
    max_length: Optional[int] = Option(help="tokens per (query, passage) pair (default: the model's positions, "
                                       "at most 512)", domain=at_least(8))(None)
    score_cache_size: int = Option(help="pair scores kept in memory", domain=at_least(1), cli=False)(500_000)


@register("ce", takes_arg=True, help="a sentence-transformers CrossEncoder (local folder or hub id), pointwise",
          options=CrossEncoderOptions, keeps=("calls", "embeddings"), pointwise=True,
          counts=lambda arg, options: CrossEncoderCounts(arg, options))
def _factory(arg: str, options: CrossEncoderOptions) -> CrossEncoderReranker:
    return CrossEncoderReranker(arg, options)


__all__ = ["CrossEncoderReranker", "pair_key"]
