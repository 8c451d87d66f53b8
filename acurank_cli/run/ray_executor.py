"""Windows executed by Ray actors: one backend built once in each actor, anywhere on a Ray cluster.

``--ray ADDRESS`` (``local``: a cluster started for this run; ``auto``: the running one, as
``ray.init(address="auto")`` finds it; or an address), ``--actors N``, ``--gpus-per-actor G``; defaults: one actor
per GPU of the cluster with G = 1, else one per CPU with G = 0. The driver keeps everything that is the run's:
reading, the call cache (its only writer: the pool sits behind it), outputs, stats, resume and provenance; an
actor only executes windows. :class:`RayPool` is a backend to the scheduler (:mod:`acurank_cli.run.driver`):
its lanes are the actors, each executing one call at a time. An actor that dies (its process killed, its node
gone) has the call it held sent again to another actor, so nothing answered is paid twice beyond the windows that
actor held; Ray restarts it where it can. The run's bytes do not depend on which actor answered: every actor
runs the same backend on the same windows.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import InputError
from ..records import RerankRequest, RerankResult
from ..rerankers.backend import BackendChoice, BackendWrapper, RerankerBase
from .lanes import QUERIES_PER_LANE

#: how often a call is sent again after the actor holding it died, before the run stops with one line
ATTEMPTS = 8
#: seconds the actors have to start their backends (a large model's load takes minutes), from the environment
START_SECONDS_ENV = "ACURANK_RAY_START_SECONDS"


def start_seconds() -> float:
    """How long actors may take to start their backend: ``$ACURANK_RAY_START_SECONDS``, else 900."""
    try:
        return max(1.0, float(os.environ.get(START_SECONDS_ENV, "900")))
    except ValueError:
        raise InputError(f"{START_SECONDS_ENV}={os.environ[START_SECONDS_ENV]!r}: must be a number of seconds") from None


@dataclass(frozen=True)
class RayOptions:
    """Where windows run: the cluster's ``address`` (local, auto, or an address), the actors and their GPUs (None:
    the defaults above)."""

    address: str
    actors: int | None = None
    gpus_per_actor: float | None = None

    def __post_init__(self) -> None:
        if not self.address:
            raise InputError("--ray: give local, auto or a cluster's address")
        if self.actors is not None and self.actors < 1:
            raise InputError(f"--actors {self.actors}: must be an integer >= 1")
        if self.gpus_per_actor is not None and self.gpus_per_actor < 0:
            raise InputError(f"--gpus-per-actor {self.gpus_per_actor}: must be a number >= 0")


def ray_options(address: str | None, actors: int | None, gpus_per_actor: float | None,
                flags: bool = False) -> RayOptions | None:
    """``--ray`` (``ray=``) and its companions, which mean nothing without it and are refused alone."""
    if address is None:
        if actors is not None or gpus_per_actor is not None:
            raise InputError("--actors and --gpus-per-actor go with --ray ADDRESS" if flags else
                             "actors= and gpus_per_actor= go with ray=")
        return None
    return RayOptions(address, actors, gpus_per_actor)


def _ray():
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs the Python package 'ray': pip install 'acurank[ray]'") from None
    return ray


def connect(options: RayOptions) -> bool:
    """Join (or start, for ``local``) the cluster; True when this call started Ray (the run shuts it down)."""
    ray = _ray()
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a local cluster on 127.0.0.1, not the interface
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
    _messages_to_stderr()
    _reachable(options.address)
    with _fd2_held(active=options.address != "local") as held:  # a cluster started here keeps its own fd 2
        try:
            if options.address == "local":
                ray.init(**kwargs)
            else:
                ray.init(address=options.address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            if AUTH_REFUSED.search(held.read()):
                held.drop()
                raise InputError(_auth_refused(options.address)) from None
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputError(f"--ray {options.address}: cannot reach a Ray cluster ({first[:200]})") from None
    return True


#: what Ray's core logs when a cluster with token authentication refuses a client
AUTH_REFUSED = re.compile(r"InvalidAuthToken|Unauthenticated|AuthenticationError")


def _auth_refused(address: str) -> str:
    """The one line for a cluster that refused this client's token (or its lack of one), with the remedy."""
    mode = os.environ.get("RAY_AUTH_MODE")
    why = ("RAY_AUTH_MODE is not 'token', so no token was sent (Ray sends one to an explicit address only then)"
           if (mode or "").lower() != "token" else "the token sent is not the cluster's")
    return (f"--ray {address}: the Ray cluster uses token authentication and refused this client: {why}. "
            "Give it the cluster's token: export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=TOKEN (or RAY_AUTH_TOKEN_PATH="
            "FILE, or the file ~/.ray/auth_token); `ray get-auth-token` on the head node prints it (docs/scale.md)")


class _fd2_held:
    """Ray's core writes its connection retries on file descriptor 2 from C++ (one line a second, for ~20 s): held
    in a temporary file while Ray connects, then written out as it was, or dropped when acurank says it in one
    line instead. Not ``active``: nothing is held (``read`` is empty)."""

    def __init__(self, active: bool = True):
        self.active = active

    def __enter__(self) -> "_fd2_held":
        import tempfile

        if not self.active:
            return self
        sys.stderr.flush()
        self.file = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        self.keep = True
        return self

    def read(self) -> str:
        if not self.active:
            return ""
        sys.stderr.flush()
        self.file.seek(0)
        return self.file.read().decode("utf-8", "replace")

    def drop(self) -> None:
        self.keep = False

    def __exit__(self, *exc) -> None:
        if not self.active:
            return
        text = self.read() if self.keep else ""
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.close()
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()


def _reachable(address: str) -> None:
    """A ``host:port`` (or ``ray://host:port``) that nothing answers on is one line at once (Ray itself retries for
    minutes); ``local`` and ``auto`` are Ray's to find."""
    import socket

    if address in ("local", "auto"):
        return
    host, _, port = address.rpartition("://")[2].rpartition(":")
    if not port.isdigit():
        raise InputError(f"--ray {address}: expected local, auto or HOST:PORT")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as exc:
        raise InputError(f"--ray {address}: cannot reach a Ray cluster ({exc.strerror or exc})") from None


def _messages_to_stderr() -> None:
    """Ray's driver prints the cluster's error messages ("A worker died ...") on stdout, which carries the run when
    no --output is given: they go to stderr instead (its one printing function, wrapped; a Ray without it is left
    alone)."""
    try:
        from ray._private import worker
    except ImportError:
        return
    shown = getattr(worker, "print_to_stdstream", None)
    if shown is None or getattr(shown, "acurank", False):
        return

    def to_stderr(data, ignore_prefix):
        return shown({**data, "is_err": True}, ignore_prefix)

    to_stderr.acurank = True
    worker.print_to_stdstream = to_stderr


def _actor_class(ray):
    @ray.remote(max_restarts=-1, max_task_retries=0, max_concurrency=64)
    class BackendActor:
        """One backend, built once in this actor's process from its ``--reranker`` spec and options, at its first
        call: every call carries ``held``, the driver's one reference to the choice (inside a list, so that Ray passes
        it unread), and a process Ray has restarted builds it again from there."""

        def __init__(self):
            self.backend, self.error, self.built = None, None, False
            self.building = threading.Lock()

        def _build(self, held: list) -> None:
            with self.building:
                if self.built:
                    return
                try:  # the choice as the driver parsed and checked it: not parsed again
                    self.backend = ray.get(held[0]).build()
                except InputError as exc:
                    self.error = exc.cli()
                except ImportError as exc:
                    self.error = f"importing failed in the actor: {exc}"
                self.built = True

        def describe(self, held: list) -> dict[str, Any]:
            self._build(held)
            if self.backend is None:
                return {"error": self.error}
            b = self.backend
            return {"error": None, "name": b.name, "cache_identity": b.cache_identity(), "fingerprint": b.fingerprint(),
                    "provenance": b.provenance(), "pid": os.getpid(), "parameters": b.parameters(),
                    "node": ray.get_runtime_context().get_node_id(),
                    "lanes": int(getattr(b, "lanes", 1)), "lane_batch": getattr(b, "lane_batch", None)}

        def prompt_keys(self, held: list, requests: Sequence[RerankRequest]) -> list[str]:
            self._build(held)
            return self.backend.prompt_keys(requests)

        def rerank(self, held: list, requests: Sequence[RerankRequest]) -> list[RerankResult]:
            self._build(held)
            return self.backend.rerank(list(requests))


    return BackendActor


class _Described(RerankerBase):
    """The actors' backend as they describe it (its name, identity, fingerprint, provenance, parameters, lanes):
    what :class:`RayPool` wraps, the backend itself living in the actors."""

    def __init__(self, described: Mapping[str, Any], needs_texts: bool):
        self.described = described
        self.name, self.needs_texts = described["name"], needs_texts
        self.lanes, self.lane_batch = int(described["lanes"]), described["lane_batch"]

    def cache_identity(self):
        return self.described["cache_identity"]

    def fingerprint(self):
        return self.described["fingerprint"]

    def provenance(self):
        return self.described["provenance"]

    def parameters(self):
        return self.described["parameters"]


class RayPool(BackendWrapper):
    """A backend whose windows run in Ray actors (see the module): a :class:`BackendWrapper` whose inner backend is
    built in each actor from the one parsed choice, and known here by what the first actor reports of it (its
    identity, fingerprint and provenance)."""

    def __init__(self, choice: BackendChoice, options: RayOptions):
        ray = _ray()
        self.started = connect(options)
        resources = ray.cluster_resources()
        gpus = float(resources.get("GPU", 0))
        per = options.gpus_per_actor if options.gpus_per_actor is not None else (1.0 if gpus >= 1 else 0.0)
        count = options.actors if options.actors is not None else max(1, int(gpus // per) if per else
                                                                         int(resources.get("CPU", 1)))
        self.choice_note = (f"ray: {count} actors x {per:g} GPU on {options.address} (cluster: "
                            f"{resources.get('CPU', 0):g} CPUs, {gpus:g} GPUs)")
        actor = _actor_class(ray)
        # the choice (the simulated reranker's qrels: megabytes) is put once and held here for the pool's life, its
        # reference going with every call (see BackendActor): an actor Ray restarts builds the backend again from
        # this owner, and an actor has no constructor argument in the object store for Ray's core to warn about on
        # every run ("has constructor arguments in the object store and max_restarts > 0", ray-project/ray#53727)
        self.held = [ray.put(choice)]
        self.actors = [actor.options(num_gpus=per, num_cpus=0 if per else 1).remote() for _ in range(count)]
        self.actors, described = self._started(ray)
        failed = next((d["error"] for d in described if d["error"]), None)
        if failed:
            self.close()
            raise InputError(f"--ray: the backend failed to load in an actor: {failed}")
        first = described[0]
        #: the cluster nodes the actors run on
        self.nodes = sorted({d["node"] for d in described})
        self.choice_note += f"; actors on {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''}"
        if len(self.actors) < count:
            self.choice_note += f"; {count - len(self.actors)} could not start and were left out"
        super().__init__(_Described(first, choice.needs_texts))
        # each actor takes as many calls at once as its backend has lanes (a server's requests in flight), each of
        # the backend's own size (an engine: every window the lane holds, as one batch)
        inner = int(first["lanes"])
        self.lanes, self.lane_batch = len(self.actors) * inner, first["lane_batch"]
        self.batch_queries = max(1, QUERIES_PER_LANE * self.lanes)
        self.free: queue.Queue = queue.Queue()
        for a in self.actors:
            for _ in range(inner):
                self.free.put(a)
        self.resent = 0
        self._lock = threading.Lock()
        #: lanes of actors that died, out of rotation until Ray has them back (id(actor) -> lanes), and lanes lost
        self._away: dict[int, int] = {}
        self._lost = 0

    def _started(self, ray) -> tuple[list, list[dict[str, Any]]]:
        """The actors that started their backend, with what each reports of it. An actor that dies while starting
        (its process killed, its node gone) is asked again once Ray has restarted it, up to :data:`ATTEMPTS` times,
        as an actor that dies mid-run is; one that has not started within :func:`start_seconds` (one that dies at
        every start is restarted by Ray for ever, its answer never comes) is left out. The run stops with one line
        only when no actor started."""
        from ray import exceptions as ray_errors

        started, described, last = [], [], None
        limit = start_seconds()
        deadline = time.monotonic() + limit
        for a in self.actors:
            asked = a.describe.remote(self.held)
            for _ in range(ATTEMPTS):
                ready, _ = ray.wait([asked], timeout=max(0.0, deadline - time.monotonic()))
                if not ready:
                    last = f"not started within {limit:g} s ({START_SECONDS_ENV})"
                    break
                try:
                    described.append(ray.get(asked))
                    started.append(a)
                    break
                except (ray_errors.RayActorError, ray_errors.RpcError) as exc:
                    last = exc  # died while starting: restarted by Ray (max_restarts=-1), asked again
                    asked = a.describe.remote(self.held)
                except Exception as exc:  # noqa: BLE001 - a worker that cannot start at all: one line
                    last = exc
                    break
            if not started or started[-1] is not a:
                _kill(ray, a)
        if not started:
            self.close()
            raise InputError(f"--ray: no actor could start the backend ({str(last).splitlines()[0][:200]})")
        return started, described

    def notes(self) -> list[str]:
        return [self.choice_note]

    def provenance(self):
        return {**self.inner.provenance(), "executor": f"ray ({len(self.actors)} actors)"}

    def use_store(self, call_cache: str | None) -> None:
        """The actors' backends keep their own stores (if any) where they run."""

    def prompt_key(self, request: RerankRequest) -> str:
        return self.prompt_keys([request])[0]

    def prompt_keys(self, requests: Sequence[RerankRequest]) -> list[str]:
        """Every request's prompt key (the call cache's) in one round trip to a free lane of an actor (an engine's
        tokenizer is never used beside its call), not one round trip a window."""
        ray = _ray()
        from ray import exceptions as ray_errors

        for _ in range(ATTEMPTS):
            actor = self._lane()
            try:
                keys = ray.get(actor.prompt_keys.remote(self.held, list(requests)))
            except (ray_errors.RayActorError, ray_errors.ActorUnavailableError):
                self._failed(actor)  # dead or restarting: out of rotation until it is back; ask another
                continue
            self.free.put(actor)
            return keys
        raise InputError(f"ray: {ATTEMPTS} actors died while building prompts; the cluster is failing")

    def rerank(self, requests: Sequence[RerankRequest], on_result=None) -> list[RerankResult]:
        """The windows on a free actor; where it dies, the same windows on another (Ray restarts the dead one)."""
        ray = _ray()
        from ray import exceptions as ray_errors

        for _ in range(ATTEMPTS):
            actor = self._lane()
            try:
                results = ray.get(actor.rerank.remote(self.held, list(requests)))
            except (ray_errors.RayActorError, ray_errors.ActorUnavailableError):
                with self._lock:
                    self.resent += len(requests)
                self._failed(actor)  # restarted by Ray (max_restarts=-1): it takes work again when it is back
                continue
            except ray_errors.RayTaskError as exc:
                self.free.put(actor)
                cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                if isinstance(cause, InputError):
                    raise cause from None
                raise InputError(f"ray: the backend failed on a window ({str(cause).splitlines()[0][:200]})") from None
            self.free.put(actor)
            if on_result is not None:
                for i, result in enumerate(results):
                    on_result(i, result)
            return results
        raise InputError(f"ray: {ATTEMPTS} actors died holding the same windows; the cluster is failing")

    def _lane(self):
        """A free lane's actor; the run stops with one line when every lane is lost (its actor never came back)."""
        while True:
            try:
                return self.free.get(timeout=1.0)
            except queue.Empty:
                with self._lock:
                    if self._lost >= self.lanes:
                        raise InputError("ray: every actor died and none came back; the cluster is failing") from None

    def _failed(self, actor) -> None:
        """A lane whose actor died: kept out of rotation (a restarting actor refuses at once, so the retries would
        all land on it and fail within milliseconds, as they did beside two CPU hogs) until the actor answers again,
        then handed back; lost when it has not come back within :func:`start_seconds`."""
        with self._lock:
            first = id(actor) not in self._away
            self._away[id(actor)] = self._away.get(id(actor), 0) + 1
        if first:
            threading.Thread(target=self._return_when_back, args=(actor,), daemon=True,
                             name="acurank-ray-returning").start()

    def _return_when_back(self, actor) -> None:
        ray = _ray()
        from ray import exceptions as ray_errors

        deadline, back = time.monotonic() + start_seconds(), False
        while not back and time.monotonic() < deadline and self.actors:
            try:
                ray.get(actor.describe.remote(self.held), timeout=max(1.0, deadline - time.monotonic()))
                back = True
            except ray_errors.GetTimeoutError:
                break
            except (ray_errors.RayActorError, ray_errors.RpcError):
                time.sleep(0.5)  # restarting: asked again
        with self._lock:
            lanes = self._away.pop(id(actor), 0)
            if not back:
                self._lost += lanes
        for _ in range(lanes if back else 0):
            self.free.put(actor)

    def close(self) -> None:
        ray = _ray()
        for a in getattr(self, "actors", []):
            _kill(ray, a)
        self.actors = []
        if getattr(self, "started", False):
            ray.shutdown()
            self.started = False


def _kill(ray, actor) -> None:
    try:
        ray.kill(actor)
    except Exception:  # noqa: BLE001 - closing, or leaving out an actor that never started
        pass
