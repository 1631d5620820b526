"""The documented limits of LabelGate's inputs, in one place.

Every limit is checked at the boundary where the input enters — the configuration loader and models, the table
loader, the pre-flight header check and row validation — so that an input beyond it is refused at once with a
message naming the key, column or file and the value, instead of running until killed. ``README.md`` ("Limits")
lists them.

Attributes
----------
MAX_N_BOOT : int
    Bootstrap resamples (``interval.n_boot``, ``interval.diagnose_n_boot``, ``monitor.n_boot``). 100,000
    resamples already give percentile ends accurate to the third decimal; more only costs time.
MAX_CATEGORIES : int
    Categories of one question, listed in the configuration or found in the trusted replication. Agreement over
    more than a thousand categories is free text, not labels, and the per-item count tables grow with it.
MAX_CONFIG_BYTES : int
    Size of a configuration file (1 MiB; the commented example is about 5 KiB).
MAX_COLUMNS : int
    Columns of an input table, checked on the header before the table is parsed.
MAX_HEADER_CHARS : int
    Characters of a CSV header line: 10,000 columns of up to 100 characters each.
MAX_LABEL_CHARS : int
    Characters of one label; a longer label is an invalid row (quarantined), not a category.
MAX_DECOMPRESSION_RATIO, MIN_DECOMPRESSED_BYTES : int
    A compressed table file (``.gz``, ``.bz2``, ``.xz``, ``.zip``, ``.zst``; a Parquet file's pages) may expand to
    :func:`decompressed_limit` of its size: ``MAX_DECOMPRESSION_RATIO`` times its size, and at least
    ``MIN_DECOMPRESSED_BYTES`` (64 MiB). Label tables compress 5 to 30 times; a compression bomb a thousand times.
"""

from __future__ import annotations

import logging

MAX_N_BOOT = 100_000
MAX_CATEGORIES = 1_000
MAX_CONFIG_BYTES = 1 << 20
MAX_COLUMNS = 10_000
MAX_HEADER_CHARS = 1 << 20
MAX_LABEL_CHARS = 1_000
MAX_DECOMPRESSION_RATIO = 100
MIN_DECOMPRESSED_BYTES = 64 << 20


def decompressed_limit(compressed_bytes: int) -> int:
    """Bytes a compressed file of ``compressed_bytes`` may expand to.

    Examples
    --------
    >>> decompressed_limit(1_000) == MIN_DECOMPRESSED_BYTES, decompressed_limit(10 << 20) == 1000 << 20
    (True, True)
    """
    return max(MIN_DECOMPRESSED_BYTES, MAX_DECOMPRESSION_RATIO * max(compressed_bytes, 0))

#: Characters of a value quoted in an error or quarantine message (longer values are cut, with their length).
SHOWN_CHARS = 40


def shown(value: object) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARS` characters with the full length when longer.

    Examples
    --------
    >>> shown("pos")
    "'pos'"
    >>> shown("x" * 5000)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… (5000 characters)"
    """
    text = repr(value)
    if len(text) <= SHOWN_CHARS:
        return text
    size = len(value) if isinstance(value, str) else len(text)
    return f"{text[:SHOWN_CHARS]}… ({size} characters)"


def one_line(value: object) -> str:
    r"""``str(value)`` on one line and free of control characters: each non-printable character (a line break, an
    escape sequence, a NUL) is written as its Python escape, so a value from the data (a file name, a batch id, a
    reason quoting a cell) can never forge a line of a log or drive a terminal.

    Examples
    --------
    >>> one_line("rnd\n2026-11-29 INFO decided payroll: ACCEPT")
    'rnd\\n2026-11-29 INFO decided payroll: ACCEPT'
    >>> one_line("\x1b[31mred\x1b[0m"), one_line(None)
    ('\\x1b[31mred\\x1b[0m', 'None')
    """
    text = str(value)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class OneLineFormatter(logging.Formatter):
    r"""A formatter whose every record is one line: the message, its arguments and any traceback escaped with
    :func:`one_line` (``labelgate serve`` and the webhook receiver log through it).

    Examples
    --------
    >>> record = logging.LogRecord("x", logging.INFO, "", 0, "decided %s: %s", ("a\nb", "ACCEPT"), None)
    >>> OneLineFormatter("%(levelname)s %(message)s").format(record)
    'INFO decided a\\nb: ACCEPT'
    """

    def format(self, record: logging.LogRecord) -> str:
        return one_line(super().format(record))
