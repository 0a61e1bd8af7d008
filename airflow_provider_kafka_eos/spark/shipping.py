"""The provider's job-side code travels with the job, so executors need nothing of ours installed.

``runtime_zip()`` packs the Airflow-free part of the package (its top-level modules, ``kafka/``,
``spark/``: everything a driver or a task of the write imports) into a zip whose name carries a
hash of its content. ``ship_to_executors(spark)`` adds it to the job with
``SparkContext.addPyFile`` (Python workers put it on ``sys.path`` before they unpickle a task),
once per SparkContext; on Spark Connect, which has no SparkContext, with
``spark.addArtifacts(path, pyfile=True)`` once per client session (a session's artifacts are fixed:
a name added once cannot be added with other bytes, and the zip's name carries its content hash).
The submit operator also passes it with ``--py-files``, which in cluster deploy mode is how the
*driver* gets the code; a driver that imported the package from such a
zip ships nothing more (Spark already distributes ``--py-files`` to the executors).

The Airflow modules (hooks, operators, sensors, triggers, CLI) and the test broker stay out:
they cannot run without Airflow and no task needs them.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import airflow_provider_kafka_eos as _package
from airflow_provider_kafka_eos.spark import sessions

__all__ = ["SHIPPED_SUBPACKAGES", "runtime_zip", "ship_to_executors"]

SHIPPED_SUBPACKAGES = ("kafka", "spark")
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)  # fixed timestamps: the same sources give the same bytes
_lock = threading.Lock()


def package_dir() -> Path | None:
    """The package's folder on disk, or None when it was itself imported from a zip."""
    folder = Path(_package.__file__).resolve().parent
    return folder if folder.is_dir() else None


def runtime_zip(directory: str | os.PathLike[str] | None = None) -> Path:
    """Build (or reuse) ``airflow_provider_kafka_eos-<version>-<hash>.zip`` in ``directory``.

    Default directory: ``<tmp>/kafka-eos-runtime``. Built atomically (temp file + rename), so
    concurrent builders of the same content end with one complete file.
    """
    root = package_dir()
    if root is None:
        raise FileNotFoundError(
            f"{_package.__file__}: the provider was imported from an archive; its code is already "
            "shipped with the job (--py-files), there is nothing to pack"
        )
    files = _source_files(root)
    digest = hashlib.sha256()
    for relative, path in files:
        digest.update(relative.encode() + b"\0" + path.read_bytes() + b"\0")
    target_dir = Path(directory or Path(tempfile.gettempdir(), "kafka-eos-runtime"))
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"airflow_provider_kafka_eos-{_package.__version__}-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return target
    fd, temp = tempfile.mkstemp(prefix=".building-", suffix=".zip", dir=target_dir)
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
            for relative, path in files:
                info = zipfile.ZipInfo(f"airflow_provider_kafka_eos/{relative}", date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, path.read_bytes())
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


def ship_to_executors(spark: Any) -> str | None:
    """Add the runtime zip to ``spark``'s context once; returns its path (None: already shipped).

    Nothing is added when the package runs from an archive (it came with ``--py-files``) or
    when this context already has the zip.
    """
    if package_dir() is None:
        return None
    if sessions.is_connect(spark):
        return _add_artifact(spark)
    context = spark.sparkContext
    with _lock:
        path = str(runtime_zip())
        shipped = getattr(context, "_kafka_eos_shipped", None)
        if shipped == path:
            return None
        name = os.path.basename(path)
        if shipped is None and name in _submitted_py_files(context):
            context._kafka_eos_shipped = path  # spark-submit --py-files already carries this zip
            return None
        _keeping_sys_path(path, lambda: context.addPyFile(path))
        context._kafka_eos_shipped = path
        return path


def _keeping_sys_path(path: str, add: Callable[[], Any]) -> None:
    """Run ``add`` (which ships the zip at ``path``) and take off ``sys.path`` the zip it put there.

    This process already imports the provider from where it is installed. PySpark also inserts the
    shipped zip at ``sys.path[1]``, ahead of that install, where it stays: ``addPyFile`` its copy in
    the context's ``userFiles`` folder, Spark Connect's ``addArtifacts(pyfile=True)`` the zip itself.
    A process started later from this one with ``spawn`` inherits that path and imports the provider
    from the zip: found in CI, a submit task's child whose ``JOB_FILE`` then named
    ``.../airflow_provider_kafka_eos-<hash>.zip/.../spark/job.py``, which spark-submit cannot run.
    The zip is for the executors; the driver keeps its own imports.
    """
    import sys

    before = set(sys.path)
    try:
        add()
    finally:
        name = os.path.basename(path)
        sys.path[:] = [entry for entry in sys.path if entry in before or os.path.basename(entry) != name]


def _add_artifact(spark: Any) -> str | None:
    """Spark Connect: the zip as a Python artifact of this client session, once per session."""
    with _lock:
        path = str(runtime_zip())
        if getattr(spark, "_kafka_eos_shipped", None) == path:
            return None
        try:
            _keeping_sys_path(path, lambda: spark.addArtifacts(path, pyfile=True))
        except Exception as exc:
            # Another client of this session added the same name (same name = same bytes): shipped.
            if "already exists" not in str(exc).lower() and "duplicate" not in str(exc).lower():
                raise
        spark._kafka_eos_shipped = path
        return path


def _submitted_py_files(context: Any) -> set[str]:
    try:
        value = context.getConf().get("spark.submit.pyFiles", "") or ""
    except Exception:
        return set()
    return {os.path.basename(item) for item in value.split(",") if item}


def _source_files(root: Path) -> list[tuple[str, Path]]:
    # The package's top-level modules (``__init__``, ``runbook``...: the core imports some) and
    # the job-side subpackages.
    files = [(path.name, path) for path in sorted(root.glob("*.py"))]
    for sub in SHIPPED_SUBPACKAGES:
        for path in sorted((root / sub).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files.append((path.relative_to(root).as_posix(), path))
    return files
