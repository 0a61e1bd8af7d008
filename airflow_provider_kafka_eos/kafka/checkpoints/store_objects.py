"""Objects of the manifest store: read with a version, create only if absent, replace only if unchanged.

The manifest is the two-phase commit's durable vote, so every transition of it (PREPARED ->
COMMITTED / ABORTED) and of an input claim is a compare-and-set: read the object *and its
version*, decide, write only if the object is still that version. Who owns which rule:

- here: how each kind of store does it (no knowledge of what a manifest or claim means);
- ``manifest.py``: the file format; ``checkpoint.py``: what a transition may do;
  ``input_claims.py``: what a claim may do.

Stores, and what "only if" means on each:

- local paths and ``file://``: the version is the content's SHA-256; create is a hard link of a
  fsynced temp file (fails when the name exists); replace-if re-reads and writes under an
  ``flock`` on ``<object>.lock`` (one host, or a file system with working locks);
- S3 (``s3://``, through s3fs): the version is the object's ETag; create sends
  ``If-None-Match: *``, replace-if sends ``If-Match: <etag>`` (S3 answers 412, or 409 for a
  conflicting concurrent write, and nothing is written);
- any other fsspec store (GCS, Azure, ...): no precondition is sent yet. Create checks for the
  name first and replace-if re-reads and compares first, which leaves a race window of one
  round trip; a warning says so once per process (docs/manifest-format.md, "Stores").

How a process reaches a store (its credentials and endpoint) is a :class:`StoreAccess` that every
call is handed (``access=``): built by the Airflow hook from the connection's store credentials,
by the Spark job from the operator's private file, else :data:`STANDARD_CHAIN` (the store client's
own chain: ``AWS_*`` variables, profile, instance role). Nothing is remembered between calls, so
no path depends on another having run first in the same process.

A store that does not answer (an unreachable endpoint, refused credentials) raises ``OSError``
whatever the store client's own exception type: callers name the store by it.

No Airflow imports (the Spark driver and the CLI use it).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlparse

from airflow_provider_kafka_eos.kafka.errors import ManifestError

__all__ = [
    "STANDARD_CHAIN",
    "StoreAccess",
    "create_object",
    "is_local_uri",
    "local_path",
    "object_lock",
    "read_object",
    "read_versioned",
    "replace_if",
    "replace_object",
    "write_local_atomic",
]

log = logging.getLogger(__name__)
T = TypeVar("T")
_S3_PROTOCOLS = frozenset({"s3", "s3a"})
_warned_weak: set[str] = set()


@dataclass(frozen=True)
class StoreAccess:
    """How this process reaches the objects of a store: the store client's options and their origin.

    ``options`` are fsspec's (s3fs: ``key``, ``secret``, ``token``, ``endpoint_url``,
    ``client_kwargs``); they include secrets, so they are never in a repr, a log or an error.
    ``source`` says where they came from, for errors ("connection 'aws_store'").
    Why an object handed to every call and not a table the process fills: a path that was not
    handed the store's credentials must not work by accident because another path ran first in
    the same process, nor fail because none did (issue 35's cleanup DAG did).
    """

    options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    source: str = "the store client's standard credential chain"

    def filesystem(self, uri: str) -> tuple[Any, str]:
        """The fsspec filesystem and path of a non-local URI (ManifestError when none can serve it)."""
        try:
            import fsspec
        except ImportError:  # pragma: no cover - fsspec is a declared dependency
            raise ManifestError(f"{uri}: non-local manifest storage needs the fsspec package") from None
        try:
            fs, path = fsspec.core.url_to_fs(uri, **dict(self.options))
        except (ImportError, ValueError) as exc:
            raise ManifestError(f"{uri}: no filesystem for this URL ({exc})") from None
        return fs, path


STANDARD_CHAIN = StoreAccess()


def is_local_uri(uri: str) -> bool:
    """A local path or ``file://`` URI (written with rename; anything else goes through fsspec)."""
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(uri: str) -> str:
    return urlparse(uri).path if uri.startswith("file://") else uri


def _is_s3(fs: Any) -> bool:
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return bool(_S3_PROTOCOLS & set(protocols))


def _precondition_failed(exc: BaseException) -> bool:
    """An S3 412 (or 409 conditional conflict), as s3fs raises it: the write did not happen."""
    if isinstance(exc, FileExistsError):
        return True
    cause = getattr(exc, "__cause__", None)
    error = getattr(cause, "response", {}) or {}
    code = str(error.get("Error", {}).get("Code", ""))
    status = error.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


def _warn_weak(fs: Any, uri: str) -> None:
    name = type(fs).__name__
    if name not in _warned_weak:
        _warned_weak.add(name)
        log.warning("manifest store %s (%s): this store gets no write precondition from this release, so "
                    "two writers racing for one object are told apart by a re-read only (a window of one "
                    "round trip); local paths and S3 are exact", uri, name)


def _as_oserror(fn: Callable[..., T]) -> Callable[..., T]:
    """Store clients raise their own types for an unreachable endpoint (botocore's
    EndpointConnectionError is no OSError): callers get one kind, ``OSError``, to name the store by."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except (OSError, ManifestError, ValueError):  # ValueError: a path no store can hold (a NUL)
            raise
        except Exception as exc:  # the store client's own failure types
            raise OSError(f"{type(exc).__name__}: {exc}") from exc

    return wrapper


@_as_oserror
def read_object(uri: str, *, access: StoreAccess = STANDARD_CHAIN) -> bytes | None:
    """One object of the store, or None when it does not exist; other failures raise ``OSError``."""
    found = read_versioned(uri, access=access)
    return found[0] if found is not None else None


@_as_oserror
def read_versioned(uri: str, *, access: StoreAccess = STANDARD_CHAIN) -> tuple[bytes, str] | None:
    """The object and its version (see the module doc), or None when it does not exist."""
    try:
        if is_local_uri(uri):
            with open(local_path(uri), "rb") as fh:
                data = fh.read()
            return data, hashlib.sha256(data).hexdigest()
        fs, path = access.filesystem(uri)
        if _is_s3(fs):
            return _read_s3_versioned(fs, path)
        data = bytes(fs.cat_file(path))
        return data, hashlib.sha256(data).hexdigest()
    except FileNotFoundError:
        return None


def _read_s3_versioned(fs: Any, path: str, attempts: int = 10) -> tuple[bytes, str]:
    """Body and ETag of one version: s3fs reads the body under ``If-Match`` of the ETag it saw first,
    so a write landing in between fails the read (412) instead of pairing new bytes with an old ETag;
    then read again (each retry means another writer succeeded, so this ends)."""
    for _ in range(attempts):
        try:
            with fs.open(path, "rb", cache_type="none") as fh:
                etag = str(fh.details.get("ETag", ""))
                return fh.read(), etag
        except OSError as exc:  # s3fs: EBUSY "... and Etag ... no longer exists", or the 412 itself
            changed = exc.errno == errno.EBUSY or _precondition_failed(exc)
            if isinstance(exc, FileNotFoundError) or not changed:
                raise
        fs.invalidate_cache(path)
    raise OSError(f"{path} changed under {attempts} consecutive reads")


@_as_oserror
def create_object(uri: str, data: bytes, *, access: StoreAccess = STANDARD_CHAIN) -> bool:
    """Create ``uri`` with ``data`` only if it does not exist yet; False when it already does."""
    if is_local_uri(uri):
        path = local_path(uri)
        directory = os.path.dirname(os.path.abspath(path))
        tmp = _fsynced_temp(directory, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _fsync_directory(directory)
        return True
    fs, path = access.filesystem(uri)
    if _is_s3(fs):
        try:
            fs.pipe_file(path, data, mode="create")  # If-None-Match: *
            return True
        except OSError as exc:
            if _precondition_failed(exc):
                return False
            raise
    _warn_weak(fs, uri)
    if fs.exists(path):
        return False
    _make_parent(fs, path)
    fs.pipe_file(path, data)
    return True


@_as_oserror
def replace_if(uri: str, data: bytes, version: str, *, access: StoreAccess = STANDARD_CHAIN) -> bool:
    """Replace ``uri`` with ``data`` only if it still is ``version``; False when it changed (or vanished)."""
    if is_local_uri(uri):
        with object_lock(uri):
            current = read_versioned(uri, access=access)
            if current is None or current[1] != version:
                return False
            write_local_atomic(local_path(uri), data)
            return True
    fs, path = access.filesystem(uri)
    if _is_s3(fs):
        try:
            fs.pipe_file(path, data, IfMatch=version)
            return True
        except (OSError, FileNotFoundError) as exc:
            if isinstance(exc, FileNotFoundError) or _precondition_failed(exc):
                return False
            raise
    _warn_weak(fs, uri)
    current = read_versioned(uri, access=access)
    if current is None or current[1] != version:
        return False
    fs.pipe_file(path, data)
    return True


@_as_oserror
def replace_object(uri: str, data: bytes, *, access: StoreAccess = STANDARD_CHAIN) -> None:
    """Write ``uri`` whole, unconditionally (readers see the old object or the new one, never a part)."""
    if is_local_uri(uri):
        write_local_atomic(local_path(uri), data)
        return
    fs, path = access.filesystem(uri)
    _make_parent(fs, path)
    fs.pipe_file(path, data)


@contextlib.contextmanager
def object_lock(uri: str) -> Iterator[None]:
    """Serialise read-check-write of one local object: an ``flock`` on ``<object>.lock``.

    Non-local objects get no lock here: their writes carry preconditions instead (``replace_if``).
    """
    if not is_local_uri(uri) or os.name != "posix":
        yield
        return
    import fcntl

    path = local_path(uri) + ".lock"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write_local_atomic(path: str, data: bytes) -> None:
    """Temp file in the same folder, fsync, rename, fsync the folder: all or nothing, durable."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = _fsynced_temp(directory, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    # Persist the rename itself (the directory entry), or a crash could resurrect the old object.
    _fsync_directory(directory)


def _fsynced_temp(directory: str, data: bytes) -> str:
    """``data`` in a new fsynced temp file of ``directory``; its path (the caller renames or links it)."""
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _fsync_directory(directory: str) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _make_parent(fs: Any, path: str) -> None:
    parent = path.rsplit("/", 1)[0]
    with contextlib.suppress(Exception):  # object stores have no directories
        fs.makedirs(parent, exist_ok=True)
