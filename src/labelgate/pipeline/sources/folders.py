"""A drop folder: a local path or any fsspec URL (``s3://bucket/incoming``, ``gcs://…``, ``memory://…``).

One listing rule for the monitor's drop folder and the served gate: table files under the folder matching a glob
pattern, hidden files skipped, each with its size and modification time, oldest first, and only once *settled*
(unmodified for a settle time). Remote files are copied to a local folder before they are read, so the readers
stay the ones of :mod:`labelgate.pipeline.sources.tables`. fsspec (and the filesystem's own package, e.g. s3fs) is
imported only for URLs.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labelgate.errors import InputError, Reason
from labelgate.pipeline.sources.tables import TABLE_SUFFIXES


@dataclass(frozen=True)
class Arrival:
    """A file of the folder: its name relative to the folder, size and modification time (ns)."""

    name: str
    size: int
    mtime_ns: int


def inside_roots(path: str | Path, roots: list[str | Path], what: str) -> Path:
    """``path`` resolved (symbolic links followed), refused unless it lies inside one of ``roots`` (resolved too).

    Nothing of the file is read here, and the error says nothing of it but its name and the rule: a file that a
    drop folder's symbolic link or an event's ``path`` points at outside the allowed folders is not gated, so none
    of its lines can reach an error reason, a log, a report, an alert or an event.

    Parameters
    ----------
    path : str or Path
        The file asked for.
    roots : list of str or Path
        The folders its resolved path must be inside (an empty list allows nothing).
    what : str
        The file, for the message (``"the batch file named by the event"``).

    Raises
    ------
    InputError
        Reason ``outside_roots``: the resolved file is outside every root.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> inside_roots(root / "wk1.csv", [root], "the batch file") == (root / "wk1.csv").resolve()
    True
    >>> inside_roots(root / ".." / "secret.csv", [root], "the batch file")
    Traceback (most recent call last):
    ...
    labelgate.errors.InputError: The batch file '...secret.csv' is outside the folders LabelGate may read ...
    """
    resolved = Path(path).resolve()
    for root in roots:
        if resolved.is_relative_to(Path(root).resolve()):
            return resolved
    allowed = ", ".join(repr(str(root)) for root in roots) or "none configured"
    raise InputError(f"{what[0].upper()}{what[1:]} {str(path)!r} is outside the folders LabelGate may read "
                     f"({allowed}; symbolic links are followed before the check): it was not read. Put the file "
                     "inside the drop folder, or add its folder to serve.roots.", Reason.OUTSIDE_ROOTS,
                     file=str(path))


def is_url(location: str) -> bool:
    """Whether ``location`` names a filesystem by URL (``scheme://…``) rather than a local path."""
    return "://" in location and not location.startswith("file://")


class Folder:
    """A local folder or an fsspec URL, with the few operations a drop folder needs.

    Raises
    ------
    InputError
        The folder does not exist, or its URL's filesystem cannot be loaded (fsspec or its package missing).
    """

    def __init__(self, location: str, what: str = "drop folder") -> None:
        self.location = location.removeprefix("file://")
        self.remote = is_url(self.location)
        self.what = what
        if self.remote:
            try:
                import fsspec
            except ImportError:
                raise InputError(f"The {what} {location!r} is a URL: install fsspec (and the filesystem's package, "
                                 "e.g. s3fs) to watch it.", Reason.UNREADABLE_INPUT, file=location) from None
            try:
                self.fs, self.root = fsspec.core.url_to_fs(self.location)
            except (ImportError, ValueError) as exc:
                raise InputError(f"The {what} {location!r} cannot be opened: {exc}", Reason.UNREADABLE_INPUT,
                                 file=location) from None
            self.root = str(self.root).rstrip("/")
            exists = self.fs.isdir(self.root)
        else:
            exists = Path(self.location).is_dir()
        if not exists:
            raise InputError(f"The {what} {location!r} does not exist.", Reason.UNREADABLE_INPUT, file=location)

    def settled(self, pattern: str = "*", settle_seconds: float = 0.0) -> list[Arrival]:
        """Table files matching ``pattern`` (``**`` recurses), not hidden, unmodified for ``settle_seconds``; oldest
        first (then by name)."""
        settle_ns, now = int(settle_seconds * 1e9), time.time_ns()
        found = [a for a in (self._remote_files(pattern) if self.remote else self._local_files(pattern))
                 if not Path(a.name).name.startswith(".") and a.name.lower().endswith(TABLE_SUFFIXES)
                 and now - a.mtime_ns >= settle_ns]
        return sorted(found, key=lambda a: (a.mtime_ns, a.name))

    def _local_files(self, pattern: str) -> list[Arrival]:
        root = Path(self.location)
        out = []
        for path in root.glob(pattern):
            if path.is_file():
                stat = path.stat()
                out.append(Arrival(path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns))
        return out

    def _remote_files(self, pattern: str) -> list[Arrival]:
        out = []
        for path, info in self.fs.glob(f"{self.root}/{pattern}", detail=True).items():
            if info.get("type") == "file":
                out.append(Arrival(str(path)[len(self.root) + 1:].lstrip("/"), int(info.get("size") or 0),
                                   _mtime_ns(info)))
        return out

    def exists(self, name: str) -> bool:
        """Whether ``name`` (relative to the folder) exists."""
        return self.fs.exists(self._remote(name)) if self.remote else (Path(self.location) / name).is_file()

    def read_text(self, name: str) -> str:
        """The text of a small file of the folder (a sidecar)."""
        if self.remote:
            with self.fs.open(self._remote(name), "rt", encoding="utf-8") as handle:
                return str(handle.read())
        return self._inside(name).read_text(encoding="utf-8")

    def local_copy(self, name: str, cache: str | Path) -> Path:
        """A local path to read ``name`` from: the file itself, or a copy under ``cache`` for a remote folder."""
        if not self.remote:
            return self._inside(name)
        target = Path(cache) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        self.fs.get(self._remote(name), str(target))
        return target

    def move(self, name: str, destination: str) -> None:
        """Move ``name`` into the folder ``destination`` (same filesystem)."""
        if self.remote:
            target = destination.rstrip("/") if is_url(destination) else destination
            self.fs.mv(self._remote(name), f"{target}/{Path(name).name}")
            return
        Path(destination).mkdir(parents=True, exist_ok=True)
        os.replace(Path(self.location) / name, Path(destination) / Path(name).name)

    def delete(self, name: str) -> None:
        """Delete ``name`` (no error when it is gone already)."""
        if self.remote:
            if self.fs.exists(self._remote(name)):
                self.fs.rm(self._remote(name))
            return
        (Path(self.location) / name).unlink(missing_ok=True)

    def _inside(self, name: str) -> Path:
        """The local file ``name`` of the folder, refused when it resolves outside the folder (a symbolic link)."""
        return inside_roots(Path(self.location) / name, [self.location], f"the file of the {self.what}")

    def _remote(self, name: str) -> str:
        return f"{self.root}/{name}"


def _mtime_ns(info: dict[str, Any]) -> int:
    """A remote file's modification time in ns (filesystems name it differently; 0 when none is reported, so that
    the file counts as settled and is ordered by name)."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1e9)
        try:
            return int(float(value) * 1e9)
        except (TypeError, ValueError):
            continue
    return 0

