"""The hand-off between the Airflow worker and the Spark job, in one place.

``SparkEosSubmitOperator`` (on the worker) starts ``spark/job.py`` with spark-submit; what the two
say to each other is defined here, on the job side (no Airflow import: the job imports it):

- **the private file**: the Kafka client configuration (secrets included), the user's
  application params and, when the worker's Airflow connection gives them, the manifest store's
  credentials and the schema registry's settings (its credentials included), as
  ``{"client_config": {...}, "application_params": {...}, "store_options": {...},
  "schema_registry": {...}}`` in a 0600
  ``client-<pid>-<random>.json`` inside a per-user 0700 folder (``/dev/shm`` where there is one:
  the secrets never reach a disk). Never on the command line, where ``ps`` and the Spark UI show
  it. The worker writes it (:func:`write_private_file`) and deletes it when the task ends; a task
  killed without cleanup leaves one, which the next task on the host removes
  (:func:`sweep_private_files`). The job reads it (:func:`load_client_config`, :func:`load_params`);
- **the environment**: ``KAFKA_EOS_CLIENT_CONFIG_FILE`` names that file (or a JSON / Java
  ``client.properties`` file of one's own), ``KAFKA_EOS_CLIENT_CONFIG`` carries inline JSON for a
  job run by hand, ``KAFKA_EOS_PRIVATE_DIR`` moves the worker's private folder;
- **the result**: on success the job's last stdout line is ``KAFKA_EOS_MANIFEST_URI=<uri>``
  (:func:`result_line`, read back by :func:`manifest_uri_of`); a refusal is one stderr line after
  ``kafka-eos job: `` and exit code 2 (:data:`EXIT_USAGE`: the same input fails the same way, no
  retry helps), any other Kafka-side error exits 3.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import StoreAccess

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE_ENV",
    "ERROR_PREFIX",
    "EXIT_KAFKA",
    "EXIT_USAGE",
    "PRIVATE_DIR_ENV",
    "PRIVATE_FILE_CONFIG_KEY",
    "PRIVATE_FILE_PARAMS_KEY",
    "PRIVATE_FILE_REGISTRY_KEY",
    "PRIVATE_FILE_STORE_KEY",
    "RESULT_PREFIX",
    "load_client_config",
    "load_params",
    "load_registry_settings",
    "load_store_access",
    "manifest_uri_of",
    "private_dir",
    "result_line",
    "sweep_private_files",
    "write_private_file",
]

CONFIG_FILE_ENV = "KAFKA_EOS_CLIENT_CONFIG_FILE"
CONFIG_ENV = "KAFKA_EOS_CLIENT_CONFIG"
PRIVATE_DIR_ENV = "KAFKA_EOS_PRIVATE_DIR"
# Keys of the operator's private file (the client config and the application params together).
PRIVATE_FILE_CONFIG_KEY = "client_config"
PRIVATE_FILE_PARAMS_KEY = "application_params"
# The manifest store's fsspec options (credentials, endpoint) from the worker's Airflow connection.
PRIVATE_FILE_STORE_KEY = "store_options"
# The schema registry's settings (RegistryConfig's fields, credentials included) for record formats.
PRIVATE_FILE_REGISTRY_KEY = "schema_registry"
RESULT_PREFIX = "KAFKA_EOS_MANIFEST_URI="
ERROR_PREFIX = "kafka-eos job: "  # the operator reads the job's one-line error after this
EXIT_USAGE = 2  # usage or configuration error: the same input fails the same way (no retry)
EXIT_KAFKA = 3  # any other error of the provider (Kafka, the manifest store)

_RESULT_LINE = re.compile(rf"^{re.escape(RESULT_PREFIX)}(?P<uri>\S+)\s*$")
_PRIVATE_FILE = re.compile(r"^client-(?P<pid>\d+)-[A-Za-z0-9_]+\.json$")


# -- the result line ----------------------------------------------------------------------------


def result_line(uri: str) -> str:
    """The job's last stdout line on success."""
    return f"{RESULT_PREFIX}{uri}"


def manifest_uri_of(line: str) -> str | None:
    """The manifest URI a job's result line names (None: ``line`` is another line)."""
    match = _RESULT_LINE.match(line)
    return match.group("uri") if match else None


# -- the private file: the worker's side ---------------------------------------------------------


def private_dir() -> str:
    """``<base>/kafka-eos-<uid>``, created 0700, refused if another user owns it (someone could
    read or plant files there). ``<base>`` is ``$KAFKA_EOS_PRIVATE_DIR``, else ``/dev/shm``
    (memory-backed: the secrets never reach a disk) when the host has a writable one, else the
    temp folder."""
    from airflow_provider_kafka_eos.kafka.errors import ConfigError

    shm = "/dev/shm"  # noqa: S108 (a per-user 0700 folder inside it, ownership checked below)
    base = os.environ.get(PRIVATE_DIR_ENV) or (
        shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()
    )
    path = os.path.join(base, f"kafka-eos-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ConfigError(f"{path} is not a directory owned by this user; refusing to put secrets there")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def write_private_file(directory: str, payload: Mapping[str, Any]) -> str:
    """A 0600 ``client-<pid>-<random>.json`` in ``directory``; the pid lets a later sweep tell
    a live task's file from a dead one's."""
    fd, path = tempfile.mkstemp(prefix=f"client-{os.getpid()}-", suffix=".json", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return path


def sweep_private_files(directory: str) -> list[str]:
    """Remove the private files whose writing process is gone (a SIGKILLed task); return them.

    A task removes its own file when it ends (``finally`` / ``on_kill``); only a task killed
    without cleanup leaves one, and the next task on the host removes it here. A file whose pid
    is alive (a running task, or a reused pid) is left alone, and so is one a live process was
    started with (its job, which outlives a killed task and which the task's retry waits for:
    ``tasks/reattach.py``; the job reads the file after it starts).
    """
    removed = []
    for name in sorted(os.listdir(directory)):
        match = _PRIVATE_FILE.match(name)
        if match is None or _process_alive(int(match.group("pid"))):
            continue
        path = os.path.join(directory, name)
        if _a_job_reads(path):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed.append(path)
    return removed


def _a_job_reads(path: str) -> bool:
    """Whether a live process (of this user: others' are not readable) was started with ``path`` as
    its private file (``CONFIG_FILE_ENV`` in its environment). Asked only of a dead task's file."""
    import psutil

    for process in psutil.process_iter(["environ"]):
        if (process.info.get("environ") or {}).get(CONFIG_FILE_ENV) == path:
            return True
    return False


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


# -- the private file: the job's side ------------------------------------------------------------


def load_client_config(environ: Mapping[str, str] | None = None) -> Any:
    """The Kafka config from the file or variable the operator set; never from argv."""
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.errors import ConfigError

    env = os.environ if environ is None else environ
    path = env.get(CONFIG_FILE_ENV)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{CONFIG_FILE_ENV}={path}: cannot be read ({exc.strerror})") from None
        if text.lstrip().startswith("{"):
            data = json_object(text, CONFIG_FILE_ENV)
            if PRIVATE_FILE_CONFIG_KEY in data:  # the operator's private file: config + params
                data = data[PRIVATE_FILE_CONFIG_KEY]
            return KafkaClientConfig.from_mapping(data, source=path)
        return KafkaClientConfig.from_properties_file(path)
    inline = env.get(CONFIG_ENV)
    if inline:
        return KafkaClientConfig.from_mapping(json_object(inline, CONFIG_ENV), source=CONFIG_ENV)
    raise ConfigError(
        f"no Kafka client configuration: set {CONFIG_FILE_ENV} (a JSON or client.properties file) or "
        f"{CONFIG_ENV} (JSON); SparkEosSubmitOperator sets the file from the kafka_eos connection"
    )


def load_params(args_params: str | None, environ: Mapping[str, str] | None = None) -> dict:
    """The application's params: from the operator's private file, else ``--params`` (by hand)."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    env = os.environ if environ is None else environ
    path = env.get(CONFIG_FILE_ENV)
    from_file = None
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError:
            text = ""  # load_client_config reports the unreadable file
        if text.lstrip().startswith("{"):
            from_file = json_object(text, CONFIG_FILE_ENV).get(PRIVATE_FILE_PARAMS_KEY)
    if from_file is not None:
        if args_params not in (None, "", "{}"):
            raise UsageError("--params and the operator's private params file were both given; use one")
        if not isinstance(from_file, dict):
            raise UsageError(f"{CONFIG_FILE_ENV}: {PRIVATE_FILE_PARAMS_KEY!r} must be a JSON object")
        return from_file
    return json_object(args_params or "{}", "--params")


def load_store_access(environ: Mapping[str, str] | None = None) -> StoreAccess:
    """How the job reaches the manifest store: the store options of the operator's private file.

    Without them the store client's standard chain applies (``AWS_*`` variables, profile,
    instance role): how a job run by hand, or in cluster mode with a mounted file, is configured.
    The job hands the result to every store call it makes (nothing is kept process-wide).
    """
    from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN, StoreAccess

    options = _private_file_object(PRIVATE_FILE_STORE_KEY, environ)
    return StoreAccess(options, source="the operator's private file") if options else STANDARD_CHAIN


def load_registry_settings(environ: Mapping[str, str] | None = None) -> dict | None:
    """The schema registry's settings from the operator's private file (or a mounted file of the same
    shape), or None: the record formats' registry then comes from ``--record-formats`` (no secrets)."""
    return _private_file_object(PRIVATE_FILE_REGISTRY_KEY, environ)


def _private_file_object(key: str, environ: Mapping[str, str] | None) -> dict | None:
    """One JSON object of the operator's private file (``store_options``, ``schema_registry``), or
    None: no file named, the file unreadable (``load_client_config`` reports that), a
    ``client.properties`` file (no such objects), or no such key. A key that is not an object is
    refused by name."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    env = os.environ if environ is None else environ
    path = env.get(CONFIG_FILE_ENV)
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    if not text.lstrip().startswith("{"):
        return None
    value = json_object(text, CONFIG_FILE_ENV).get(key)
    if value is not None and not isinstance(value, dict):
        raise UsageError(f"{CONFIG_FILE_ENV}: {key!r} must be a JSON object")
    return value


def json_object(text: str, where: str) -> dict:
    """``text`` parsed as one JSON object; ``where`` names its source in the error."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{where}: must be a JSON object, got {type(value).__name__}")
    return value
