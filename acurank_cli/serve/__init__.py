"""``acurank serve``: listwise reranking over HTTP (:mod:`.routes`), in Cohere's and Jina's shapes (:mod:`.protocol`),
every request's windows through the one scheduler (:mod:`.service`), counted for Prometheus (:mod:`.metrics`), within
its :mod:`.limits`."""
