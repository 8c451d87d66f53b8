"""Running the method over queries: the composition root, the one driver, and what a run job needs around them.

    pipeline        the one composition root (Session): method, backend, call cache and defaults wired once, for the
                    CLI, the API, the PyTerrier transformer and the server
    driver          the one driver: strategies decide windows, rerankers execute them (batches, lanes, admission)
    job             a rerank job: inputs -> session -> append-only outputs, the summary line, stops that keep work
    inputs          candidates, topics, texts and qrels assembled for a job
    spool           the queries of a run held on disk, bounding memory by the batch
    budget_grants   the query-set budget (--budget-total): which optional steps are sent next
    fingerprint     what determines a run's result, recorded so a resume never mixes settings
    provenance      where a run came from (software, model), for the meta file
    progress        the live view on stderr
    ray_executor    windows executed by Ray actors

Importing this package loads nothing; each module loads on first use.
"""
