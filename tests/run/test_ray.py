"""--ray: windows executed by Ray actors on a real cluster (`ray start --head`, every node on 127.0.0.1), the
driver keeping cache, outputs and resume: the local run's bytes for every method family, an actor killed with
SIGKILL mid-run (the run completes with the same bytes), and one line for what cannot work."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import ENV, SAMPLE, acurank, chat_server

#: every node on 127.0.0.1 (Ray otherwise puts them on the interface address); token authentication off on this
#: loopback-only cluster (its token file in ~/.ray is shared by every cluster a machine starts). Set before Ray is
#: imported in this process (it reads them then): the Python API's test joins the cluster from here.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
os.environ.update(RAY_ENV)
pytest.importorskip("ray", reason="the ray extra is not installed")

DL19 = SAMPLE / "dl19"
LOOPBACK = {**ENV, **RAY_ENV}
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: a plug-in whose backend dies while it starts in an actor: ``once:FOLDER`` the first actor to start (it leaves a
#: mark in FOLDER; Ray restarts it and it starts), ``always:FOLDER`` every one; else it answers in reverse
START_DEATHS = """
import os
from pathlib import Path
from acurank_cli import RerankerBase, RerankResult, register


@register("dies-at-start", takes_arg=True, help="dies while it starts in a Ray actor (tests)")
class DiesAtStart(RerankerBase):
    name = "dies-at-start"

    def __init__(self, arg):
        mode, folder = arg.split(":", 1)
        if os.environ.get("ACURANK_TEST_CLUSTER"):  # in an actor of the test's cluster, not in the driver
            mark = Path(folder) / "died"
            if mode == "always" or not mark.exists():
                mark.write_text("died")
                os._exit(1)

    def rerank_batch(self, requests):
        return [RerankResult(order=tuple(reversed(range(len(r.docs))))) for r in requests]
"""


@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ray-plugins")
    (folder / "start_deaths.py").write_text(START_DEATHS)
    return folder


@pytest.fixture(scope="module")
def cluster(plugins):
    """A head node started as a user starts one (`ray start --head`), on 127.0.0.1; its address. Its processes (and
    so its actors) carry ACURANK_TEST_CLUSTER=PORT, by which a test finds its own actors and no other cluster's, and
    import the plug-ins above."""
    port = _free_port()
    env = {**LOOPBACK, "ACURANK_TEST_CLUSTER": str(port), "PYTHONPATH": str(plugins)}
    started = subprocess.run([RAY, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                              "--disable-usage-stats"], capture_output=True, text=True, env=env, timeout=180)
    if started.returncode != 0:
        pytest.skip(f"ray start failed here: {started.stderr[-300:]}")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, env=env, timeout=120)


def _stop(head: subprocess.Popen) -> None:
    """A `ray start --head --block` of this test's, stopped with every process of its session: SIGKILL to the group
    (measured: nothing of the session is left after 1.1 s; a SIGTERM let Ray shut down gracefully for 34 s, and
    `ray stop` would stop the module's cluster too)."""
    os.killpg(head.pid, signal.SIGKILL)
    head.wait(60)


def _actors_of(address: str) -> list[int]:
    """The pids of the BackendActor processes of the cluster at ``address`` (its ACURANK_TEST_CLUSTER mark): never
    another cluster's, as a test beside this one may run its own."""
    mark = f"ACURANK_TEST_CLUSTER={address.rsplit(':', 1)[1]}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            title = (proc / "cmdline").read_bytes()
            if title.startswith(b"ray::BackendActor") and mark in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return sorted(pids)


def _cli(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "acurank_cli", *map(str, args)], capture_output=True, text=True,
                          env=LOOPBACK, timeout=timeout)


SIM = ("--reranker", "simulated", "--qrels", DL19 / "qrels.txt", "--no-cache", "--quiet")
FAMILIES = [("rerank", "acurank"), ("rerank", "acurank-auto-9"), ("baseline", "sw-1"), ("baseline", "tourrank-1"),
            ("baseline", "ts-5-2-2-1"), ("baseline", "blitz-k20")]


def test_every_method_family_gives_the_local_runs_bytes(cluster):
    qids = "19335,47923,87181,104861,130510,131843"
    for command, method in FAMILIES:
        local = acurank(command, DL19 / "bm25.run", "--method", method, *SIM, "--qids", qids).stdout
        ran = _cli(command, DL19 / "bm25.run", "--method", method, *SIM, "--qids", qids, "--ray", cluster,
                   "--actors", "2")
        assert "core_worker" not in ran.stderr and "object store" not in ran.stderr, ran.stderr  # no Ray core warning
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert ran.stdout == local, method


def test_an_actor_killed_mid_run_costs_only_its_windows_and_the_bytes_are_the_same(cluster, tmp_path):
    httpd, state, lock = chat_server(0.05)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    common = ["--method", "sw-1", "--reranker", "openai:fake", "--base-url", url, "--concurrency", "2", "--quiet",
              "--qids", "19335,47923,87181,104861,130510,131843,146187,148538"]
    try:
        local = _cli("baseline", DL19 / "bm25.run", *common, "--no-cache")
        assert local.returncode == 0, local.stderr
        before = state["requests"]
        proc = subprocess.Popen([sys.executable, "-m", "acurank_cli", "baseline", str(DL19 / "bm25.run"), *common,
                                 "--cache", str(tmp_path / "c.sqlite"), "--ray", cluster, "--actors", "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=LOOPBACK)
        killed = threading.Event()

        def kill_one_actor() -> None:
            # 12 windows answered: every actor of the run has reported its backend ready (the run sends no window
            # before), and one of this cluster's actors is killed, never another test's
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and state["requests"] - before < 12:
                time.sleep(0.05)
            found = _actors_of(cluster)
            if found:
                os.kill(found[0], signal.SIGKILL)
                killed.set()

        killer = threading.Thread(target=kill_one_actor)
        killer.start()
        out, err = proc.communicate(timeout=600)
        killer.join()
        assert proc.returncode == 0, err[-2000:]
        assert killed.is_set(), "no actor process was found to kill"
        assert out == local.stdout
        paid = state["requests"] - before
        assert 72 <= paid <= 72 + 2, paid  # 8 queries x 9 windows, plus at most what the dead actor held (2 lanes)
    finally:
        httpd.shutdown()


def test_an_actor_that_dies_while_starting_is_restarted_and_the_run_is_the_same(cluster, plugins, tmp_path):
    """An actor whose process dies while its backend starts (the first of the run's) is asked again once Ray has
    restarted it, as a mid-run death is survived: the run completes with the local run's bytes."""
    env = {**LOOPBACK, "PYTHONPATH": str(plugins), "ACURANK_BACKENDS": "start_deaths"}
    args = [sys.executable, "-m", "acurank_cli", "baseline", str(DL19 / "bm25.run"), "--method", "sw-1", "--qids",
            "19335,47923", "--reranker", f"dies-at-start:once:{tmp_path}", "--no-cache", "--quiet"]
    local = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert local.returncode == 0, local.stderr
    ran = subprocess.run([*args, "--ray", cluster, "--actors", "2"], capture_output=True, text=True, env=env,
                         timeout=600)
    assert (tmp_path / "died").exists(), "no actor died while starting"
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout == local.stdout


def test_a_run_whose_every_actor_dies_while_starting_is_one_line(cluster, plugins, tmp_path):
    """Ray restarts an actor that dies at every start for ever, so its answer never comes: after the start time
    (ACURANK_RAY_START_SECONDS, 900 by default, 15 here) it is left out, and with none left the run is one line."""
    env = {**LOOPBACK, "PYTHONPATH": str(plugins), "ACURANK_BACKENDS": "start_deaths", "ACURANK_RAY_START_SECONDS": "15"}
    ran = subprocess.run([sys.executable, "-m", "acurank_cli", "baseline", str(DL19 / "bm25.run"), "--method", "sw-1",
                          "--qids", "19335", "--reranker", f"dies-at-start:always:{tmp_path}", "--no-cache", "--quiet",
                          "--ray", cluster, "--actors", "1"], capture_output=True, text=True, env=env, timeout=600)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr[-2000:]
    # acurank's one line, last (Ray's own raylet lines on each worker's death come before it)
    errors = [line for line in ran.stderr.splitlines() if line.startswith("acurank:")]
    assert errors == ["acurank: error: --ray: no actor could start the backend (not started within 15 s "
                      "(ACURANK_RAY_START_SECONDS))"], ran.stderr
    assert ran.stderr.strip().endswith(errors[0])


def test_the_python_api_runs_on_the_cluster_too(cluster):
    from acurank_cli.api import Reranker

    docs = [{"id": f"d{i}", "text": f"passage {i}", "score": 30.0 - i} for i in range(30)]
    qrels = {"q": {"d7": 3, "d21": 2, "d3": 1}}
    local = Reranker("simulated", "acurank", cache=None, qrels=qrels).rerank("a query", docs, qid="q")
    remote = Reranker("simulated", "acurank", cache=None, qrels=qrels, ray=cluster, actors=2)
    try:
        out = remote.rerank("a query", docs, qid="q")
    finally:
        remote.close()
    assert [d.id for d in out.docs] == [d.id for d in local.docs] and out.calls == local.calls


def test_what_cannot_work_is_one_line(cluster):
    ran = _cli("rerank", DL19 / "bm25.run", *SIM, "--ray", "127.0.0.1:1", "--qids", "19335", timeout=180)
    assert ran.returncode == 2 and "cannot reach a Ray cluster" in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
    ran = _cli("rerank", DL19 / "bm25.run", "--reranker", "hf:/nonexistent/model", "--no-cache", "--ray", cluster,
               "--actors", "1", "--qids", "19335")
    assert ran.returncode == 2 and "--ray: the backend failed to load in an actor" in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr
    ran = acurank("rerank", DL19 / "bm25.run", *SIM, "--actors", "2", check=False)
    assert ran.returncode == 2 and "--actors and --gpus-per-actor go with --ray" in ran.stderr


def test_a_two_node_cluster_uses_both_nodes():
    """ray.cluster_utils.Cluster: two nodes of one CPU each on 127.0.0.1; two one-CPU actors land one on each, and
    the run is the local run."""
    import ray
    from ray.cluster_utils import Cluster

    from acurank_cli.api import Reranker
    from acurank_cli.rerankers.backend import BackendChoice
    from acurank_cli.run.ray_executor import RayOptions, RayPool

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        qrels = {"q": {"d7": 3, "d21": 2, "d3": 1}}
        pool = RayPool(BackendChoice.of("simulated", {"qrels": qrels}), RayOptions(cluster.address, 2))
        try:
            assert len(pool.nodes) == 2 and len(ray.nodes()) == 2
            docs = [{"id": f"d{i}", "text": "t", "score": 30.0 - i} for i in range(30)]
            remote = Reranker(pool, "acurank", cache=None).rerank("a query", docs, qid="q")
            local = Reranker("simulated", "acurank", cache=None, qrels=qrels).rerank("a query", docs, qid="q")
            assert [d.id for d in remote.docs] == [d.id for d in local.docs]
        finally:
            pool.close()
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_the_pyterrier_transformer_runs_on_the_cluster_too(cluster):
    pt = pytest.importorskip("pyterrier")
    pd = pytest.importorskip("pandas")
    from acurank_cli.integrations.pyterrier import AcuRankReranker

    run = pd.read_csv(DL19 / "bm25.run", sep=r"\s+", header=None, dtype={0: str, 2: str},
                      names=["qid", "Q0", "docno", "rank", "score", "tag"])
    topics = pd.read_csv(DL19 / "topics.tsv", sep="\t", header=None, names=["qid", "query"], dtype=str, quoting=3)
    frame = run[run["qid"].isin(["19335", "47923", "87181"])].merge(topics, on="qid")[["qid", "query", "docno", "score"]]
    sim = {"qrels": str(DL19 / "qrels.txt"), "cache": None}
    local = AcuRankReranker("simulated", "acurank", **sim).transform(frame)
    remote = AcuRankReranker("simulated", "acurank", ray=cluster, actors=2, **sim)
    try:
        assert type(remote.reranker.backend).__name__ == "RayPool"  # the windows go to the actors
        got = remote.transform(frame)
    finally:
        remote.reranker.close()
    assert isinstance(remote, pt.Transformer)
    columns = ["qid", "docno", "rank", "score"]
    assert got[columns].reset_index(drop=True).equals(local[columns].reset_index(drop=True))


def test_a_cluster_with_token_authentication_runs_and_a_refused_token_says_so(tmp_path):
    """`ray start --head` with RAY_AUTH_MODE=token (as a machine with ~/.ray/auth_token starts one): a run given the
    token (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN) gives the local run's bytes; without it, or with another, one line
    that names token authentication and the remedy, and none of Ray's retry lines."""
    import secrets

    token = secrets.token_hex(32)
    home = tmp_path / "home"  # no ~/.ray of this machine's is read or written
    home.mkdir()
    given = {**LOOPBACK, "HOME": str(home), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    port = _free_port()
    head = subprocess.Popen([RAY, "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
                             "--include-dashboard=false", "--disable-usage-stats"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=given, start_new_session=True)
    try:
        args = ("rerank", DL19 / "bm25.run", "--qids", "264014", *SIM, "--ray", f"127.0.0.1:{port}")
        deadline = time.monotonic() + 120
        while True:  # the head takes a few seconds to listen
            ran = subprocess.run([sys.executable, "-m", "acurank_cli", *map(str, args), "-o", tmp_path / "ray.run"],
                                 capture_output=True, text=True, env=given, timeout=300)
            if ran.returncode == 0 or time.monotonic() > deadline or "cannot reach" not in ran.stderr:
                break
            time.sleep(2)
        assert ran.returncode == 0, ran.stderr
        local = _cli(*args[:-2], "-o", tmp_path / "local.run")
        assert local.returncode == 0 and (tmp_path / "ray.run").read_bytes() == (tmp_path / "local.run").read_bytes()
        for env, why in (({k: v for k, v in given.items() if not k.startswith("RAY_AUTH")}, "no token was sent"),
                         ({**given, "RAY_AUTH_TOKEN": "0" * 64}, "the token sent is not the cluster's")):
            refused = subprocess.run([sys.executable, "-m", "acurank_cli", *map(str, args), "-o", tmp_path / "x.run"],
                                     capture_output=True, text=True, env=env, timeout=300)
            assert refused.returncode == 2, refused.stderr
            lines = refused.stderr.strip().splitlines()
            assert "uses token authentication and refused this client" in lines[-1] and why in lines[-1], lines
            assert "RAY_AUTH_MODE=token" in lines[-1] and "gcs_client" not in refused.stderr, refused.stderr
            assert token not in refused.stderr
    finally:
        _stop(head)


def test_the_previous_releases_plugins_run_on_ray_actors(tmp_path):
    """The last release's plug-in recipe (positional RerankResult and Step, modules under their old names), found
    through ACURANK_BACKENDS/ACURANK_METHODS, on a cluster whose workers import it: the run is the local run's
    bytes, every window answered in an actor."""
    from test_extension import PREVIOUS_RELEASE

    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "old_plugins.py").write_text(PREVIOUS_RELEASE)
    env = {**LOOPBACK, "PYTHONPATH": str(plugins), "ACURANK_BACKENDS": "old_plugins", "ACURANK_METHODS": "old_plugins",
           "HOME": str(tmp_path)}
    port = _free_port()
    head = subprocess.Popen([RAY, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
                             "--include-dashboard=false", "--disable-usage-stats"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        args = [sys.executable, "-m", "acurank_cli", "baseline", str(DL19 / "bm25.run"), "--qids", "264014,1110199",
                "--method", "blocks", "--reranker", "overlap", "--no-cache", "--quiet"]
        local = subprocess.run([*args, "-o", str(tmp_path / "local.run")], capture_output=True, text=True, env=env,
                               timeout=300)
        assert local.returncode == 0, local.stderr
        deadline = time.monotonic() + 120
        while True:  # the head takes a few seconds to listen
            ran = subprocess.run([*args, "--ray", f"127.0.0.1:{port}", "--actors", "2", "-o", str(tmp_path / "ray.run")],
                                 capture_output=True, text=True, env=env, timeout=300)
            if ran.returncode == 0 or time.monotonic() > deadline or "cannot reach" not in ran.stderr:
                break
            time.sleep(2)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr
        assert (tmp_path / "ray.run").read_bytes() == (tmp_path / "local.run").read_bytes()
        stats = (tmp_path / "ray.stats.jsonl").read_text().splitlines()
        assert len(stats) == 2 and all('"parse_counts": {"ok": 5}' in line for line in stats)
        assert '"executor": "ray (2 actors)"' in (tmp_path / "ray.run.meta.json").read_text()
    finally:
        _stop(head)
