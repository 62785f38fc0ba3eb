"""Import roots: the only directories the server reads import files from.

A path a request names becomes a *confined* real path: a relative path is taken under the
first root, then ``..`` and every symlink are resolved (``realpath``) and the result must be
a regular file inside one root. Devices, fifos, sockets and directories are refused, and no
message quotes anything but the path the client gave.

The check runs twice: by the proxy when the request arrives (``confine``) and by the data
node when it opens the file (``open_confined``), because a symlink can be swapped in
between. The open itself does not follow a final symlink and does not block on a fifo, and
the opened descriptor is checked again (its type, and the path the kernel reports for it).

Uploads (``elanus import`` / ``bulk_import`` of a file the server cannot see) land in the
upload area, ``<storage>/import/uploads/<id>/<name>``: on the shared storage, so every data
node of a cluster can read them, and always an accepted root.

With an object store as storage (``s3://bucket/prefix``), ``<storage>/import`` is a default
root (the upload area lies in it) and the staging area the root of a staged write: such a
location is confined as text (an object store has no links; empty, ``.`` and ``..`` parts
are refused), must be an object, and is opened through pyarrow's file system.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, TypeAlias

import pyarrow as pa
import pyarrow.fs as pafs

from elanus.errors import ElanusError, ErrorCode
from elanus.objstore import S3, is_remote, make_dirs, storage_error, storage_errors, storage_of
from elanus.settings import Settings

UPLOADS = "uploads"
_SHOWN_CHARS = 200
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME_CHARS = 200
Readable: TypeAlias = BinaryIO | pa.NativeFile
"""An opened import file: a local descriptor, or an object-store file of pyarrow's."""


Root = Path | str
"""A local directory, or a prefix in the object store (``s3://bucket/...``, compared as
text: an object store has no links to resolve)."""


def default_roots(settings: Settings) -> list[Root]:
    """``<data_dir>/import`` and ``<storage>/import`` (Milvus reads imports from its bucket;
    with an object store as storage, that prefix)."""
    shared: Root = (
        posixpath.join(settings.storage_uri, "import")
        if settings.storage_remote
        else settings.storage_path / "import"
    )
    return [settings.data_path / "import", shared]


def upload_area(settings: Settings) -> str:
    """``<storage>/import/uploads``: on the storage, so every data node can read it."""
    return posixpath.join(settings.storage_uri, "import", UPLOADS)


def import_roots(settings: Settings) -> list[Root]:
    """The roots in force, local ones as real paths: ``import_roots`` (comma separated) or
    the defaults, plus the upload area when no root holds it."""
    configured = [p.strip() for p in (settings.import_roots or "").split(",") if p.strip()]
    listed: list[Root] = list(configured) or default_roots(settings)
    roots = [real_root(r) for r in listed]
    area = real_root(upload_area(settings))
    if not any(within(area, r) for r in roots):
        roots.append(area)
    return roots


def real_root(root: Root) -> Root:
    """A local root as its real path; an object-store one without a trailing ``/``."""
    if isinstance(root, str) and is_remote(root):
        return root.rstrip("/")
    return Path(os.path.realpath(Path(root).expanduser()))


def ensure_dirs(settings: Settings) -> None:
    """Create the default roots (when ``import_roots`` is unset) and the upload area (an
    object store needs no directories)."""
    dirs = [] if settings.import_roots else default_roots(settings)
    for d in [*dirs, upload_area(settings)]:
        make_dirs(d)


def _as_root(root: Root) -> Root:
    return root if isinstance(root, Path) or is_remote(root) else Path(root)


def within(path: Root, root: Root) -> bool:
    """``path`` is ``root`` or lies under it (both local, or both in the object store)."""
    path, root = _as_root(path), _as_root(root)
    if isinstance(path, Path) and isinstance(root, Path):
        return path == root or root in path.parents
    if isinstance(path, str) and isinstance(root, str):
        return path == root or path.startswith(root.rstrip("/") + "/")
    return False


def shown(requested: str) -> str:
    """The client's path as a message quotes it (shortened, never anything read)."""
    text = requested if len(requested) <= _SHOWN_CHARS else requested[:_SHOWN_CHARS] + "…"
    return repr(text)


def refused(requested: str, why: str) -> ElanusError:
    return ElanusError(ErrorCode.PATH_NOT_ALLOWED, f"path {shown(requested)} {why}")


def resolve(requested: str, roots: Sequence[Root]) -> Root:
    """The real path (or object-store location) ``requested`` names, refused unless it lies
    inside a root (no I/O beyond resolving links; the file need not exist)."""
    if not requested or "\x00" in requested:
        raise refused(requested, "is not a usable file path")
    roots = [_as_root(r) for r in roots]
    if is_remote(requested):
        return _resolve_remote(requested, requested, roots)
    path = Path(requested)
    if not path.is_absolute():
        if not roots:
            raise refused(requested, "is relative, and no import root is configured")
        first = roots[0]
        if isinstance(first, str):
            return _resolve_remote(requested, posixpath.join(first, requested), roots)
        path = first / path
    real = Path(os.path.realpath(path))
    if not any(within(real, r) for r in roots):
        raise refused(requested, "is outside the import roots")
    return real


def _resolve_remote(requested: str, location: str, roots: Sequence[Root]) -> str:
    """An object-store location, refused when a part is empty, ``.`` or ``..`` (a key is
    taken literally: nothing to resolve) or when it is outside every root."""
    bucket, _, key = location[len(S3) :].partition("/")
    if not bucket or any(part in ("", ".", "..") for part in key.split("/")):
        raise refused(requested, "is not a usable file path")
    if not any(within(location, r) for r in roots):
        raise refused(requested, "is outside the import roots")
    return location


def absolute(requested: str, roots: Sequence[Root]) -> str:
    """The path as the data node gets it: a relative one under the first root."""
    if is_remote(requested) or Path(requested).is_absolute() or not roots:
        return requested
    first = _as_root(roots[0])
    return posixpath.join(first, requested) if isinstance(first, str) else str(first / requested)


def confine(requested: str, roots: Sequence[Root]) -> Root:
    """``resolve``, and the result must be an existing regular file."""
    real = resolve(requested, roots)
    if isinstance(real, str):
        _require_object(requested, real)
        return real
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        raise refused(requested, "does not exist under the import roots") from None
    except OSError:
        raise refused(requested, "cannot be examined") from None
    _require_regular(requested, mode)
    return real


def _require_object(requested: str, location: str) -> None:
    """An object-store location must be a file (an object, not a prefix)."""
    st = storage_of(location)
    with storage_errors(location, "examine"):
        kind = st.fs.get_file_info(st.fs_path(location)).type
    if kind == pafs.FileType.NotFound:
        raise refused(requested, "does not exist under the import roots")
    if kind != pafs.FileType.File:
        what = "a directory" if kind == pafs.FileType.Directory else "not a regular file"
        raise refused(requested, f"is {what}; only regular files can be imported")


def _require_regular(requested: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a fifo"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    raise refused(requested, f"is {kind}; only regular files can be imported")


def open_confined(requested: str | os.PathLike[str], roots: Sequence[Root]) -> Readable:
    """Open a confined file for reading, checking the opened descriptor itself (an object
    in the object store is opened through its file system)."""
    text = os.fspath(requested)
    real = confine(text, roots)
    if isinstance(real, str):
        return _open_object(text, real)
    flags = os.O_RDONLY | _flag("O_NOFOLLOW") | _flag("O_NONBLOCK") | _flag("O_CLOEXEC")
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the final part became a symlink after the check
            raise refused(text, "changed while it was checked (now a symlink)") from None
        if exc.errno == errno.ENOENT:
            raise refused(text, "does not exist under the import roots") from None
        raise refused(text, "cannot be opened") from None
    try:
        info = os.fstat(fd)
        _require_regular(text, info.st_mode)
        opened = _descriptor_path(fd)
        if opened is not None:
            if not any(within(opened, r) for r in roots):
                raise refused(text, "is outside the import roots")
        else:  # no /proc: the path must still name the very file that was opened
            now = os.stat(real)
            if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino) or Path(
                os.path.realpath(real)
            ) != real:
                raise refused(text, "changed while it was opened")
        if _flag("O_NONBLOCK"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_object(requested: str, location: str) -> pa.NativeFile:
    st = storage_of(location)
    try:
        return st.fs.open_input_file(st.fs_path(location))
    except FileNotFoundError:
        raise refused(requested, "does not exist under the import roots") from None
    except (OSError, pa.ArrowException) as exc:
        raise storage_error(location, "open", exc) from None


def _flag(name: str) -> int:
    return int(getattr(os, name, 0))


def _descriptor_path(fd: int) -> Path | None:
    """Where the kernel says an open descriptor's file is (Linux), else None."""
    link = f"/proc/self/fd/{fd}"
    try:
        return Path(os.readlink(link))
    except OSError:
        return None


def safe_upload_name(name: str) -> str:
    """An uploaded file's name reduced to its last part and to ``[A-Za-z0-9._-]`` (the
    suffix, which says the format, kept); refused when nothing usable is left."""
    base = re.split(r"[\\/]", name)[-1]
    cleaned = _UNSAFE_NAME.sub("_", base).lstrip(".")
    if len(cleaned) > MAX_NAME_CHARS:
        stem, dot, suffix = cleaned.rpartition(".")
        cleaned = (stem[: MAX_NAME_CHARS - len(suffix) - 1] + dot + suffix) if dot else ""
    if not cleaned.strip("._-"):
        raise ElanusError(
            ErrorCode.INVALID_ARGUMENT, f"upload name {shown(name)} has no usable file name"
        )
    return cleaned
