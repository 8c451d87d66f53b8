"""The backends, one module each, every one a :class:`~acurank_cli.rerankers.backend.RerankerBase` registered at its
import: ``simulated`` (the specified oracle), ``minilm`` (offline bi-encoder), ``cross_encoder`` (``ce:``), ``hf``
(``hf:``, transformers), ``vllm`` (``vllm:``, an in-process engine, with ``vllm_permutations`` for its constrained
answers), ``openai`` (``openai:``, with the HTTP requests in ``openai_transport``); ``checkpoints`` says where a
local model's weights come from and ``embeddings`` keeps the encoders' vectors beside the call cache."""
