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
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from elanus.errors import ElanusError, ErrorCode
from elanus.settings import Settings

UPLOADS = "uploads"
_SHOWN_CHARS = 200
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME_CHARS = 200


def default_roots(settings: Settings) -> list[Path]:
    """``<data_dir>/import`` and ``<storage>/import`` (Milvus reads imports from its bucket);
    with an object store as storage, the local one only."""
    if settings.storage_remote:
        return [settings.data_path / "import"]
    return [settings.data_path / "import", settings.storage_path / "import"]


def upload_area(settings: Settings) -> Path:
    """Under ``files_path``: the storage, or the data dir when that is an object store."""
    return settings.files_path / "import" / UPLOADS


def import_roots(settings: Settings) -> list[Path]:
    """The roots in force, as real paths: ``import_roots`` (comma separated) or the
    defaults, plus the upload area when no root holds it."""
    configured = [p.strip() for p in (settings.import_roots or "").split(",") if p.strip()]
    listed = [Path(p).expanduser() for p in configured] or default_roots(settings)
    roots = [Path(os.path.realpath(p)) for p in listed]
    area = Path(os.path.realpath(upload_area(settings)))
    if not any(within(area, r) for r in roots):
        roots.append(area)
    return roots


def ensure_dirs(settings: Settings) -> None:
    """Create the default roots (when ``import_roots`` is unset) and the upload area."""
    dirs = [] if settings.import_roots else default_roots(settings)
    for d in [*dirs, upload_area(settings)]:
        d.mkdir(parents=True, exist_ok=True)


def within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def shown(requested: str) -> str:
    """The client's path as a message quotes it (shortened, never anything read)."""
    text = requested if len(requested) <= _SHOWN_CHARS else requested[:_SHOWN_CHARS] + "…"
    return repr(text)


def refused(requested: str, why: str) -> ElanusError:
    return ElanusError(ErrorCode.PATH_NOT_ALLOWED, f"path {shown(requested)} {why}")


def resolve(requested: str, roots: Sequence[Path]) -> Path:
    """The real path ``requested`` names, refused unless it lies inside a root (no I/O
    beyond resolving links; the file need not exist)."""
    if not requested or "\x00" in requested:
        raise refused(requested, "is not a usable file path")
    path = Path(requested)
    if not path.is_absolute():
        if not roots:
            raise refused(requested, "is relative, and no import root is configured")
        path = roots[0] / path
    real = Path(os.path.realpath(path))
    if not any(within(real, r) for r in roots):
        raise refused(requested, "is outside the import roots")
    return real


def confine(requested: str, roots: Sequence[Path]) -> Path:
    """``resolve``, and the result must be an existing regular file."""
    real = resolve(requested, roots)
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        raise refused(requested, "does not exist under the import roots") from None
    except OSError:
        raise refused(requested, "cannot be examined") from None
    _require_regular(requested, mode)
    return real


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


def open_confined(requested: str | os.PathLike[str], roots: Sequence[Path]) -> BinaryIO:
    """Open a confined file for reading, checking the opened descriptor itself."""
    text = os.fspath(requested)
    real = confine(text, roots)
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
