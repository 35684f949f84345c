"""Opening a statement file with a hard size limit, checked before a single byte is parsed."""

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, Protocol

from .errors import StatementParseError

DEFAULT_MAX_BYTES = 50 * 1024 * 1024


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


StatementSource = bytes | bytearray | memoryview | str | os.PathLike | _Readable


def _too_large(size: int | None, max_bytes: int) -> StatementParseError:
    shown = f"{size} bytes" if size is not None else f"more than {max_bytes} bytes"
    return StatementParseError("file_too_large", f"the file has {shown}; the limit is {max_bytes} bytes")


class _LimitedReader(io.RawIOBase):
    """Refuses to hand out more than ``max_bytes`` even when the size could not be known up front
    (a pipe, a stream that grows while we read)."""

    def __init__(self, raw: _Readable, max_bytes: int):
        self._raw = raw
        self._left = max_bytes
        self._max_bytes = max_bytes

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        # Ask for one byte more than allowed so an over-long stream is noticed, not silently cut.
        want = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        data = self._raw.read(want)
        self._left -= len(data)
        if self._left < 0:
            raise _too_large(None, self._max_bytes)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _known_size(stream: _Readable) -> int | None:
    size = getattr(stream, "size", None)  # Django's UploadedFile
    if isinstance(size, int):
        return size
    try:
        position = stream.tell()  # type: ignore[attr-defined]
        end = stream.seek(0, os.SEEK_END)  # type: ignore[attr-defined]
        stream.seek(position)  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None
    return end - position


@contextmanager
def open_limited(source: StatementSource, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[BinaryIO]:
    """Yield a binary reader over ``source``.

    ``source`` is bytes, a filesystem path (``str``/``PathLike``) or a binary file-like object.
    Raises ``StatementParseError('file_too_large')`` before reading when the size is known and above
    ``max_bytes``, and while reading otherwise. A file opened here is closed on exit; a caller's file
    object is left open.
    """
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    if isinstance(source, bytes | bytearray | memoryview):
        if len(source) > max_bytes:
            raise _too_large(len(source), max_bytes)
        yield io.BytesIO(bytes(source))  # type: ignore[misc]
        return
    if isinstance(source, str | os.PathLike):
        if isinstance(source, str) and source.lstrip().startswith("<"):
            raise TypeError("pass XML content as bytes; a str is read as a file path")
        size = os.stat(source).st_size
        if size > max_bytes:
            raise _too_large(size, max_bytes)
        with open(source, "rb") as handle:
            yield io.BufferedReader(_LimitedReader(handle, max_bytes))  # type: ignore[misc]
        return
    if not hasattr(source, "read"):
        raise TypeError(f"cannot read a statement from {type(source).__name__}")
    size = _known_size(source)
    if size is not None and size > max_bytes:
        raise _too_large(size, max_bytes)
    yield io.BufferedReader(_LimitedReader(source, max_bytes))  # type: ignore[misc]
