"""acurank: uncertainty-aware adaptive listwise reranking (AcuRank, NeurIPS 2025) as a CLI filter."""

__version__ = "0.1.0"
