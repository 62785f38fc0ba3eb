"""The storage root as one interface: a local directory or ``s3://bucket/prefix``.

Every role reaches segments, delta logs, pk statistics, index files and uploads through
*locations*: strings that are either an absolute local path or an ``s3://`` URI under the
storage root (``elanus/layout.py`` composes them). Plain files go through pyarrow's file
systems; Lance datasets take ``lance_options(location)`` as their ``storage_options``.

A process registers its root once (``configure``, from its settings); a location under
an ``s3://`` root it never configured (a Spark executor) is opened with the S3 settings
of the environment. Errors of the object store become one ``ElanusError`` naming the
setting to check, never a raw traceback.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from elanus.errors import ElanusError, ErrorCode
from elanus.settings import Settings, load_settings

S3 = "s3://"
_PROBE_DIR = ".elanus-probe"


def is_remote(location: str) -> bool:
    return location.startswith(S3)


@dataclass(frozen=True)
class S3Config:
    """The S3 settings in force (``ELANUS_S3_*``, else the usual ``AWS_*`` variables)."""

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    allow_http: bool = False

    @classmethod
    def of(cls, settings: Settings) -> S3Config:
        env = os.environ.get
        return cls(
            endpoint=settings.s3_endpoint or env("AWS_ENDPOINT_URL_S3") or env("AWS_ENDPOINT_URL"),
            region=settings.s3_region or env("AWS_REGION") or env("AWS_DEFAULT_REGION"),
            access_key_id=settings.s3_access_key_id or env("AWS_ACCESS_KEY_ID"),
            secret_access_key=settings.s3_secret_access_key or env("AWS_SECRET_ACCESS_KEY"),
            allow_http=settings.s3_allow_http,
        )

    def filesystem(self) -> pafs.FileSystem:
        kwargs: dict[str, Any] = {
            "region": self.region or "us-east-1",
            "connect_timeout": 5,
            "request_timeout": 30,
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3),
        }
        if self.access_key_id or self.secret_access_key:
            kwargs["access_key"] = self.access_key_id or ""
            kwargs["secret_key"] = self.secret_access_key or ""
        if self.endpoint:
            scheme, _, rest = self.endpoint.rpartition("://")
            kwargs["endpoint_override"] = rest
            kwargs["scheme"] = scheme or ("http" if self.allow_http else "https")
        return pafs.S3FileSystem(**kwargs)

    def lance_options(self) -> dict[str, str]:
        """Lance's object-store keys for the same settings."""
        opts = {"aws_region": self.region or "us-east-1"}
        if self.endpoint:
            opts["aws_endpoint"] = self.endpoint
        if self.access_key_id:
            opts["aws_access_key_id"] = self.access_key_id
        if self.secret_access_key:
            opts["aws_secret_access_key"] = self.secret_access_key
        if self.allow_http or (self.endpoint or "").startswith("http://"):
            opts["allow_http"] = "true"
        return opts


class Storage:
    """One storage root: its file system, the root's path in it, Lance's options."""

    def __init__(self, root: str, s3: S3Config | None = None) -> None:
        self.root = root.rstrip("/") if is_remote(root) else root
        self.s3 = s3
        if is_remote(root):
            self.fs: pafs.FileSystem = (s3 or S3Config()).filesystem()
            self.lance_options: dict[str, str] | None = (s3 or S3Config()).lance_options()
        else:
            self.fs, self.lance_options = pafs.LocalFileSystem(), None

    @property
    def remote(self) -> bool:
        return is_remote(self.root)

    def fs_path(self, location: str) -> str:
        return location[len(S3) :] if is_remote(location) else location

    def probe(self) -> None:
        """Write, read back and delete a small object under the root, so wrong credentials,
        a missing bucket or an unreachable endpoint fail at start-up with a clear error."""
        if not self.remote:
            Path(self.root).mkdir(parents=True, exist_ok=True)
            return
        path = self.fs_path(posixpath.join(self.root, _PROBE_DIR, uuid.uuid4().hex))
        with storage_errors(self.root, "write a test object"):
            with self.fs.open_output_stream(path) as out:
                out.write(b"elanus")
            with self.fs.open_input_stream(path) as f:
                if f.read() != b"elanus":
                    raise OSError("the probe object read back differently")
            self.fs.delete_file(path)


_LOCAL = Storage("/")
_ROOTS: dict[str, Storage] = {}
_LOCK = threading.Lock()


def configure(settings: Settings) -> Storage:
    """The storage of ``settings`` (registered, so every location under it finds it)."""
    root = settings.storage_uri
    s3 = S3Config.of(settings) if is_remote(root) else None
    with _LOCK:
        found = _ROOTS.get(root)
        if found is None or found.s3 != s3:
            found = _ROOTS[root] = Storage(root, s3)
    return found


def storage_of(location: str | os.PathLike[str]) -> Storage:
    loc = os.fspath(location)
    if not is_remote(loc):
        return _LOCAL
    with _LOCK:
        best = max(
            (s for r, s in _ROOTS.items() if loc == r or loc.startswith(r + "/")),
            key=lambda s: len(s.root),
            default=None,
        )
    if best is not None:
        return best
    bucket = loc[len(S3) :].split("/", 1)[0]
    return configure(load_settings().replace(storage=S3 + bucket))


@contextlib.contextmanager
def storage_errors(location: str, doing: str) -> Any:
    """Object-store failures as one ``ElanusError`` naming what to check."""
    try:
        yield
    except ElanusError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise storage_error(location, doing, exc) from None


def storage_error(location: str, doing: str, exc: BaseException) -> ElanusError:
    text = str(exc)
    if not is_remote(location):
        return ElanusError(ErrorCode.INTERNAL, f"storage: cannot {doing} {location}: {text}")
    bucket = location[len(S3) :].split("/", 1)[0]
    upper = text.upper()
    if "NO_SUCH_BUCKET" in upper or "NOSUCHBUCKET" in upper or "BUCKET DOES NOT EXIST" in upper:
        hint = f"bucket {bucket!r} does not exist (setting storage)"
    elif any(
        k in upper
        for k in (
            "ACCESS_DENIED",
            "ACCESSDENIED",
            "INVALID_ACCESS_KEY",
            "INVALIDACCESSKEY",
            "SIGNATURE",
            "FORBIDDEN",
        )
    ):
        hint = "access denied: check s3_access_key_id and s3_secret_access_key"
    elif any(k in upper for k in ("NETWORK_CONNECTION", "CURLCODE", "TIMEOUT", "RESOLVE")):
        hint = "the S3 endpoint cannot be reached: check s3_endpoint (and s3_allow_http)"
    else:
        hint = text.splitlines()[0] if text else type(exc).__name__
    return ElanusError(ErrorCode.UNAVAILABLE, f"storage {location}: cannot {doing}: {hint}")


# -- file operations on locations ---------------------------------------------------------


def lance_options(location: str | os.PathLike[str]) -> dict[str, str] | None:
    return storage_of(location).lance_options


def exists(location: str | os.PathLike[str]) -> bool:
    loc = os.fspath(location)
    st = storage_of(loc)
    with storage_errors(loc, "examine"):
        return st.fs.get_file_info(st.fs_path(loc)).type != pafs.FileType.NotFound


def is_dir(location: str | os.PathLike[str]) -> bool:
    """A directory (locally), or a prefix with objects under it (S3)."""
    loc = os.fspath(location)
    st = storage_of(loc)
    with storage_errors(loc, "examine"):
        if not st.remote:
            return st.fs.get_file_info(loc).type == pafs.FileType.Directory
        sel = pafs.FileSelector(st.fs_path(loc), allow_not_found=True, recursive=False)
        return bool(st.fs.get_file_info(sel))


def list_dir(location: str | os.PathLike[str]) -> list[str]:
    """Names of the direct children of a directory (sorted); none when it is missing."""
    loc = os.fspath(location)
    st = storage_of(loc)
    with storage_errors(loc, "list"):
        sel = pafs.FileSelector(st.fs_path(loc), allow_not_found=True, recursive=False)
        return sorted(posixpath.basename(i.path.rstrip("/")) for i in st.fs.get_file_info(sel))


def list_tree(location: str | os.PathLike[str]) -> dict[str, int]:
    """Every file under a directory: its path relative to it (sorted) and its size."""
    loc = os.fspath(location).rstrip("/")
    st = storage_of(loc)
    base = st.fs_path(loc)
    with storage_errors(loc, "list"):
        sel = pafs.FileSelector(base, allow_not_found=True, recursive=True)
        infos = st.fs.get_file_info(sel)
    files = {
        posixpath.relpath(i.path, base): int(i.size or 0)
        for i in infos
        if i.type == pafs.FileType.File
    }
    return dict(sorted(files.items()))


def modified(location: str | os.PathLike[str]) -> float | None:
    """When anything under a directory last changed, as a Unix time (the newest of it and
    its files); None when it is gone."""
    loc = os.fspath(location)
    st = storage_of(loc)
    with storage_errors(loc, "examine"):
        infos = [st.fs.get_file_info(st.fs_path(loc))] if not st.remote else []
        sel = pafs.FileSelector(st.fs_path(loc), allow_not_found=True, recursive=True)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            infos += st.fs.get_file_info(sel)
    times = [i.mtime.timestamp() for i in infos if i.mtime is not None]
    return max(times, default=None)


def make_dirs(location: str | os.PathLike[str]) -> None:
    """Create a local directory; on S3 prefixes need no creation."""
    loc = os.fspath(location)
    if not is_remote(loc):
        Path(loc).mkdir(parents=True, exist_ok=True)


def read_bytes(location: str | os.PathLike[str]) -> bytes:
    loc = os.fspath(location)
    st = storage_of(loc)
    # a random-access file reads the whole object in one GET; an input stream would read
    # it 256 KiB a request (400 requests for 100 MB: 27 s against moto, 0.2 s in one)
    with storage_errors(loc, "read"), st.fs.open_input_file(st.fs_path(loc)) as f:
        return bytes(f.read())


def write_bytes(location: str | os.PathLike[str], data: bytes | pa.Buffer) -> None:
    """Write a whole file atomically (locally: a temporary name, then a rename; an S3
    object appears whole when its upload completes)."""
    loc = os.fspath(location)
    st = storage_of(loc)
    with storage_errors(loc, "write"):
        if st.remote:
            with st.fs.open_output_stream(st.fs_path(loc)) as f:
                f.write(data)
            return
        Path(loc).parent.mkdir(parents=True, exist_ok=True)
        tmp = f"{loc}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "wb") as out:
            out.write(memoryview(data))
        os.replace(tmp, loc)


def write_stream(location: str | os.PathLike[str], chunks: Iterable[bytes | pa.Buffer]) -> int:
    """Write a file from a stream of buffers; the bytes written. Locally it gets its name
    only when whole (a temporary name, then a rename); on S3 it is one multipart upload,
    which appears only when it completes. A failure removes whatever was written."""
    loc = os.fspath(location)
    st = storage_of(loc)
    total = 0
    with storage_errors(loc, "write"):
        if not st.remote:
            Path(loc).parent.mkdir(parents=True, exist_ok=True)
        target = loc if st.remote else f"{loc}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with st.fs.open_output_stream(st.fs_path(target)) as out:
                for data in chunks:
                    total += out.write(data)
            if not st.remote:
                os.replace(target, loc)
        except BaseException:
            with contextlib.suppress(OSError, pa.ArrowException):
                st.fs.delete_file(st.fs_path(target))  # (S3: the stream completed on close)
            raise
    return total


def read_ipc(location: str | os.PathLike[str]) -> pa.Table:
    """An Arrow IPC file, whole."""
    loc = os.fspath(location)
    if not is_remote(loc):
        with pa.memory_map(loc) as source:
            return pa.ipc.open_file(source).read_all()
    return pa.ipc.open_file(pa.BufferReader(read_bytes(loc))).read_all()


def write_ipc(location: str | os.PathLike[str], table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    write_bytes(location, sink.getvalue())


def remove_tree(location: str | os.PathLike[str]) -> None:
    """Remove a directory (prefix) and everything under it; a missing one is no error. On
    S3 the prefix's directory marker goes too, so it is not listed any more."""
    loc = os.fspath(location)
    st = storage_of(loc)
    path = st.fs_path(loc)
    with storage_errors(loc, "remove"), contextlib.suppress(FileNotFoundError):
        info = st.fs.get_file_info(path)
        if info.type == pafs.FileType.Directory:
            st.fs.delete_dir(path)
        elif info.type != pafs.FileType.NotFound:
            st.fs.delete_file(path)


def remove_file(location: str | os.PathLike[str]) -> None:
    loc = os.fspath(location)
    st = storage_of(loc)
    with storage_errors(loc, "remove"), contextlib.suppress(FileNotFoundError):
        st.fs.delete_file(st.fs_path(loc))


def upload_dir(local_dir: str | os.PathLike[str], location: str | os.PathLike[str]) -> None:
    """Copy a local directory's files to ``location`` (index files built locally)."""
    loc = os.fspath(location)
    base = Path(local_dir)
    for f in sorted(p for p in base.rglob("*") if p.is_file()):
        write_bytes(posixpath.join(loc, f.relative_to(base).as_posix()), f.read_bytes())


@contextlib.contextmanager
def local_copy(location: str | os.PathLike[str], under: Path | None = None) -> Any:
    """A local directory holding the files under ``location``: the directory itself when
    it is local, else a temporary copy (in ``under``, else the system's temporary
    directory) removed on exit (index files a library reads)."""
    loc = os.fspath(location)
    if not is_remote(loc):
        yield Path(loc)
        return
    if under is not None:
        under.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="elanus-", dir=under) as tmp:
        for rel in list_tree(loc):
            dest = Path(tmp) / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(read_bytes(posixpath.join(loc, rel)))
        yield Path(tmp)


@contextlib.contextmanager
def local_target(location: str | os.PathLike[str]) -> Any:
    """A local directory to write files into that end up under ``location``: the
    directory itself when local, else a temporary one uploaded on success."""
    loc = os.fspath(location)
    if not is_remote(loc):
        Path(loc).mkdir(parents=True, exist_ok=True)
        yield Path(loc)
        return
    with tempfile.TemporaryDirectory(prefix="elanus-") as tmp:
        yield Path(tmp)
        upload_dir(tmp, loc)
