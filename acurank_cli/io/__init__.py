"""Readers and writers for TREC runs, topics, qrels, corpora and candidate files."""
