"""Reading a table file's bytes within the limits: decompressed size bounded, text free of NUL bytes.

pandas decompresses a ``.csv.gz`` by itself and keeps whatever the stream yields: a half-megabyte archive that
expands to one 512 MB field took 1.35 GB of memory before anything failed. Here the file is opened and decompressed
by LabelGate (by extension, as pandas would) and handed to the parser through :class:`BoundedReader`, which counts
the decompressed bytes and stops at :func:`~labelgate.pipeline.limits.decompressed_limit` of the file's size, so a
compression bomb costs at most that limit.

The same reader refuses a NUL byte. A NUL is not text (a UTF-16 file is full of them), and pandas < 3's C parser
ends a field at the first NUL: ``"\\x00"`` was read as a missing cell and ``"a\\x00b"`` as ``"a"``, so two ids were
merged and the gate judged a table that is not the file. Refusing the byte gives every pandas the same answer.
This module stays free of pandas: the pre-flight header check reads through it as well.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from labelgate.errors import InputError, Reason
from labelgate.pipeline.limits import decompressed_limit

#: Compression extensions read here, as pandas infers them.
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zip", ".xz", ".zst")


class BoundedReader(io.RawIOBase):
    """A binary stream over ``raw`` that refuses more than ``limit`` bytes and any NUL byte.

    Parameters
    ----------
    raw : binary file object
        The (decompressed) stream.
    limit : int
        Bytes it may yield in all.
    what : str
        The file, for messages (``"the batch file 'wk1.csv.gz'"``).
    file : str
        The file's path, recorded with the error.

    Examples
    --------
    >>> reader = BoundedReader(io.BytesIO(b"a,b\\n1,2\\n"), limit=100, what="the batch file", file="b.csv")
    >>> reader.read()
    b'a,b\\n1,2\\n'
    >>> BoundedReader(io.BytesIO(b"x" * 11), limit=10, what="the batch file", file="b.csv").read()
    Traceback (most recent call last):
    ...
    labelgate.errors.InputError: The batch file decompresses to more than 10 bytes, the limit for its size ...
    """

    def __init__(self, raw: IO[bytes], limit: int, what: str, file: str) -> None:
        super().__init__()
        self._raw, self._limit, self._what, self._file = raw, limit, what, file
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        # one byte past the limit may be read: reaching the limit exactly is allowed, passing it is not
        want = min(len(view), self._limit + 1 - self.consumed)
        data = self._raw.read(max(want, 1))
        n = len(data)
        if self.consumed + n > self._limit:
            raise InputError(f"{self._what[0].upper()}{self._what[1:]} decompresses to more than {self._limit} "
                             "bytes, the limit for its size (see Limits in the documentation); is it a "
                             "compression bomb?", Reason.UNREADABLE_INPUT, file=self._file, limit=self._limit)
        at = data.find(b"\x00")
        if at >= 0:
            raise InputError(f"{self._what[0].upper()}{self._what[1:]} holds a NUL byte at byte {self.consumed + at}"
                             " of its text; a CSV file is UTF-8 text (is it UTF-16 or binary?).",
                             Reason.UNREADABLE_INPUT, file=self._file, offset=self.consumed + at)
        view[:n] = data
        self.consumed += n
        return n


@contextlib.contextmanager
def open_text_table(path: Path, role: str = "input") -> Iterator[BoundedReader]:
    """The decompressed bytes of a CSV file (by its extension), bounded and NUL-free, as a binary stream.

    Raises
    ------
    InputError
        When read past the bound or at a NUL byte (the error comes from the stream's ``read``), or when a ``.zip``
        archive does not hold exactly one file.
    OSError, EOFError, ValueError, ImportError
        The file or its compression is unreadable (``zstandard`` missing for ``.zst``); the caller says which file.
    """
    suffix = path.suffix.lower()
    with contextlib.ExitStack() as stack:
        raw: IO[bytes]
        if suffix in (".gz", ".bz2", ".xz"):
            import bz2
            import gzip
            import lzma

            opener: Any = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[suffix]
            raw = stack.enter_context(opener(path, "rb"))
        elif suffix == ".zip":
            import zipfile

            archive = stack.enter_context(zipfile.ZipFile(path))
            members = [name for name in archive.namelist() if not name.endswith("/")]
            if len(members) != 1:
                raise InputError(f"The {role} archive {path.name!r} holds {len(members)} files; a zipped table is "
                                 "one file.", Reason.UNREADABLE_INPUT, file=str(path))
            raw = stack.enter_context(archive.open(members[0]))
        elif suffix == ".zst":
            import zstandard

            raw = stack.enter_context(zstandard.ZstdDecompressor().stream_reader(stack.enter_context(
                open(path, "rb"))))
        else:
            raw = stack.enter_context(open(path, "rb"))
        # an uncompressed file holds what the disk holds: only its NUL bytes are checked
        limit = decompressed_limit(path.stat().st_size) if suffix in COMPRESSION_SUFFIXES else 1 << 62
        yield BoundedReader(raw, limit, f"the {role} file {path.name!r}", str(path))
