"""The listwise LLM machinery every LLM backend shares: the published prompt and its formats (``prompts``), template
files and what a run adds to a prompt (``templates``), fitting a window's prompt to the context (``prompt_builder``),
how the model answers (``answers``), reading the answer (``parsing``) and the thought before it (``thinking``), and the
base class of the LLM backends (``reranker``: prompting, parsing and the prompt log, once)."""
