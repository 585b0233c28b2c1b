"""Where the lake's files live: a local folder or an object store (`LAKE_ROOT`,
docs/settings.md), as one `pyarrow.fs.FileSystem` and a root inside it.

pyarrow's filesystems (already a dependency, kept by the Arrow project) read, list and write
both. `FileSystem.from_uri` reads an object store's settings the AWS SDK's way: credentials
from its chain (`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`,
`AWS_PROFILE`, an instance role), the endpoint from `AWS_ENDPOINT_URL_S3` or
`AWS_ENDPOINT_URL` (MinIO, R2, a local server). No key passes through this code, so none can
reach a log, metadata or a file.

DuckDB reads a local lake itself. Its `httpfs` extension, which reads S3, is downloaded at
its first use, and cannot be where there is no network; so in this process DuckDB reads an
object store through the same pyarrow filesystem, registered with it as an fsspec one
(`pipelines/lake/files.py`). An analyst's DuckDB with `httpfs` reads the same views without
it (docs/deployment.md).
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from pipelines.errors import SetupError, Unavailable
from pipelines.mistakes import refuse_keys

SCHEMES = ("s3",)
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
#: A file under the store's part size goes up as one PUT, not a three-request multipart
#: upload (pyarrow opens the upload only when a part is full).
OPTIONS = "allow_delayed_open=true"
#: Bytes of objects kept once read for DuckDB (`READ_OBJECTS`): it opens a file up to three
#: times in one query (its schema, then its rows), each a HEAD and a GET on a store.
CACHED_BYTES = 64 << 20


class WrongLakeRoot(SetupError):
    """`LAKE_ROOT`, or the AWS variables that reach it, cannot work as set (a file, a scheme
    or credentials in it, a bucket that does not exist, a key the store refuses); the message
    says what to fix."""


class LakeUnavailable(Unavailable):
    """The lake's disk or store failed, or nothing answers at its endpoint; the message names
    `LAKE_ROOT` and the AWS variables to look at, and what the next run does."""


@dataclass(frozen=True)
class Place:
    """A lake's filesystem, its root inside it (a local absolute path, `bucket/prefix`) and
    the root as DuckDB and people name it (the path, `s3://bucket/prefix`)."""

    fs: pafs.FileSystem
    root: str
    uri: str

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)


def checked_root(root: str | os.PathLike[str]) -> str:
    """A `LAKE_ROOT` as written, or refused saying why: a local folder, or an object store's
    URI `s3://bucket/prefix` (whether its bucket answers is `verify`'s to tell)."""
    text = os.fspath(root).strip()
    refuse_keys({"LAKE_ROOT": text})
    if "://" not in text:
        return text
    parts = urlsplit(text)
    if parts.scheme not in SCHEMES:
        raise WrongLakeRoot(
            f"LAKE_ROOT={text}: scheme {parts.scheme!r} is not supported; give a local folder "
            "or s3://bucket/prefix"
        )
    if "@" in parts.netloc:
        # Never echoed: what comes before the @ is a key.
        raise WrongLakeRoot(
            "LAKE_ROOT holds credentials: write it as s3://bucket/prefix and put the key in "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    if not parts.hostname or parts.query or parts.fragment:
        raise WrongLakeRoot(
            f"LAKE_ROOT={text}: write it as s3://bucket/prefix (a bucket, then an optional "
            "folder; the endpoint goes in AWS_ENDPOINT_URL)"
        )
    return f"{parts.scheme}://{parts.netloc}/{parts.path.strip('/')}".rstrip("/")


def place(root: str | os.PathLike[str]) -> Place:
    """The filesystem of a `LAKE_ROOT`: a local folder, or `s3://bucket/prefix`."""
    uri = checked_root(root)
    if "://" not in uri:
        path = str(Path(uri).resolve())
        return Place(pafs.LocalFileSystem(), path, path)
    try:
        fs, path = pafs.FileSystem.from_uri(f"{uri}?{OPTIONS}")
    except (OSError, ValueError) as error:
        raise explain(error, uri) from None
    return Place(fs, path.rstrip("/"), uri)


def endpoint_setting(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The variable that names the store's endpoint and its value (AWS S3 when unset)."""
    env = os.environ if env is None else env
    for variable in ENDPOINT_VARIABLES:
        if env.get(variable, "").strip():
            return variable, env[variable].strip()
    return ENDPOINT_VARIABLES[-1], "AWS S3"


def explain(error: BaseException, uri: str) -> SetupError | LakeUnavailable:
    """What a store's refusal means for the user: the setting to fix (`WrongLakeRoot`: no
    such bucket, a key refused), or the store out of reach (`LakeUnavailable`). The store's
    own words are left out: they may quote a request, and so the key's id."""
    text = str(error)
    variable, where = endpoint_setting()
    bucket = urlsplit(uri).hostname
    if "NoSuchBucket" in text or "NotFound" in text:
        return WrongLakeRoot(
            f"LAKE_ROOT={uri}: the bucket {bucket!r} does not exist at {where}; create it, or "
            "correct LAKE_ROOT"
        )
    refused = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ACCESS_DENIED")
    if any(word in text for word in refused) or "credentials" in text.lower():
        return WrongLakeRoot(
            f"LAKE_ROOT={uri}: {where} refused the credentials; set AWS_ACCESS_KEY_ID and "
            f"AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) to a key that may list, read and write "
            f"{bucket!r}"
        )
    if any(word in text.lower() for word in ("curl", "connect", "resolve", "timed out")):
        return LakeUnavailable(
            f"LAKE_ROOT={uri}: nothing answers at {where}; correct {variable} (unset, it is "
            "AWS S3 itself) or start the service"
        )
    return LakeUnavailable(
        f"LAKE_ROOT={uri}: the object store at {where} refused it ({type(error).__name__}); "
        "check LAKE_ROOT and the AWS_* variables"
    )


#: What a disk says when it refuses a write (by errno, and by pyarrow's words for them).
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO})
DISK_WORDS = ("No space left", "Read-only file system", "Disk quota", "File too large")


def temporary_folder() -> str:
    """The system's temporary folder (`TMPDIR`), where DuckDB spills and a lake on a store
    stages its files; asked when needed, since finding it writes a file there."""
    try:
        return tempfile.gettempdir()
    except FileNotFoundError:
        tried = os.environ.get("TMPDIR") or "/tmp"
        raise LakeUnavailable(
            f"no temporary folder can be written (TMPDIR, then {tried} and the system's "
            "others): free space there, or point TMPDIR at a folder with room"
        ) from None


def disk_refusal(error: BaseException) -> str | None:
    """Why a disk refused a write (full, read-only, over quota), where `error` is that (an
    `OSError`, or DuckDB's `IOException` in its words); None otherwise."""
    number = getattr(error, "errno", None)
    if number in DISK_ERRNOS:
        return os.strerror(number)
    text = str(error)
    return next((word for word in DISK_WORDS if word in text), None)


#: What the next run does about what a failing lake kept this one from doing.
NEXT_SYNC = "the next sync lands what this one could not"


def lake_fault(error: BaseException, root: str, then: str = NEXT_SYNC) -> LakeUnavailable | None:
    """The lake's own failure during a run, told with its setting and `then`; None where
    `error` is not the lake's. A disk that refused a write (a local lake's, or for a lake on a
    store the temporary folder files are written to before their upload), or a store that
    stopped answering or refused a request."""
    if not isinstance(error, OSError):
        return None
    text = str(error)
    cause = disk_refusal(error)
    if cause is not None:
        where = (
            f"LAKE_ROOT={root}: its disk"
            if "://" not in root
            else f"the temporary folder {tempfile.tempdir or '/tmp'} (TMPDIR), where files of "
            f"LAKE_ROOT={root} are written before their upload,"
        )
        return LakeUnavailable(
            f"{where} refused a write ({cause}): free space there or point it at a disk with "
            f"room; {then}"
        )
    if "://" in root and ("AWS Error" in text or "When " in text):
        return LakeUnavailable(f"{explain(error, root)}; {then}")
    return None


def verify(place: Place) -> None:
    """A local lake's root is a folder or can be made one. On an object store, two
    requests: the bucket exists, the endpoint answers and the key may list the lake. Raises
    `WrongLakeRoot` saying what to fix, or `LakeUnavailable` where nothing answers."""
    if place.local:
        path = Path(place.root)
        # The root, else the nearest folder above it that exists: where it would be made.
        existing = next(p for p in (path, *path.parents) if os.path.exists(p))
        if not existing.is_dir():
            raise WrongLakeRoot(
                f"LAKE_ROOT={place.uri}: {existing} is a file, not a folder; set LAKE_ROOT to "
                "a folder (made where missing) or to s3://bucket/prefix"
            )
        return
    bucket = place.root.split("/", 1)[0]
    try:
        if place.fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise FileNotFoundError("NoSuchBucket")
        place.fs.get_file_info(pafs.FileSelector(place.root, allow_not_found=True))
    except OSError as error:
        raise explain(error, place.uri) from None


def upload(fs: pafs.FileSystem, source: Path, target: str) -> None:
    """Put a finished local file at `target`, whole or not at all.

    A store shows an object only once its PUT (or multipart upload) completes. pyarrow's
    output stream completes the upload when it is closed, even from its destructor after an
    error, so nothing may fail between opening it and the last byte: the file goes as one
    memory-mapped buffer. A failed part fails the close, which then completes nothing; a
    killed process leaves an unfinished multipart upload, which no reader sees (a bucket's
    lifecycle rule removes those)."""
    with pa.memory_map(str(source)) as mapped:
        data = mapped.read_buffer()
        sink = fs.open_output_stream(target)
        sink.write(data)
        sink.close()
    READ_OBJECTS.forget(target)


class _ReadObjects:
    """Objects read whole, kept by path, size and time written (as a listing tells them)
    up to `CACHED_BYTES`, least recently used out first, for every DuckDB connection of the
    process: each check, the views' build and the row counts read the same files again."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple) -> bytes | None:
        with self._lock:
            data = self._kept.get(key)
            if data is not None:
                self._kept.move_to_end(key)
            return data

    def put(self, key: tuple, data: bytes) -> None:
        with self._lock:
            if key in self._kept or len(data) > CACHED_BYTES:
                return
            self._kept[key] = data
            self._bytes += len(data)
            while self._bytes > CACHED_BYTES:
                _, dropped = self._kept.popitem(last=False)
                self._bytes -= len(dropped)

    def forget(self, path: str) -> None:
        """A file this process writes again: a store keeps times in whole seconds, so a new
        version of the same size could otherwise pass for the old one."""
        with self._lock:
            for key in [key for key in self._kept if key[0] == path]:
                self._bytes -= len(self._kept.pop(key))


READ_OBJECTS = _ReadObjects()
