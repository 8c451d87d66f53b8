"""Framework adapters (optional extras): LangChain and LlamaIndex, both delegating to :mod:`acurank_cli.api`."""
