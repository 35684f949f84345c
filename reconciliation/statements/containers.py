"""Bank files as customers upload them: plain, UTF-16/32 with a byte-order mark, gzip'ed, or a zip
of one or many statements. ``documents`` turns any of these into the statement documents inside,
each a rewound binary stream the camt or CSV parser reads as before.

Limits apply to what is unpacked, never only to the upload: the unpacked bytes of the whole file
count against ``max_bytes`` as they are inflated (so a bomb stops at the limit, it is never
inflated whole), a zip's declared sizes and compression ratios are checked before anything is
unpacked, and archives inside archives are refused. Every refusal says what the file was.
"""

import codecs
import io
import os
import re
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import BinaryIO

from .errors import StatementParseError
from .source import StatementSource, open_limited

MAX_MEMBERS = 500
# Statement XML packs 10-100x; a member claiming more than this is built to exhaust memory.
MAX_RATIO = 500
_SPOOL = 8 * 1024 * 1024
_CHUNK = 1 << 16

_BOMS = (  # longest first: the UTF-32 LE mark begins with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32LE"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32BE"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16BE"),
)
_GZIP, _ZIP, _EMPTY_ZIP = b"\x1f\x8b", b"PK\x03\x04", b"PK\x05\x06"
_DECLARED_ENCODING = re.compile(rb"""(<\?xml[^>]*?encoding\s*=\s*)(["'])[^"']*\2""")
_SIGNATURES = (
    (b"%PDF", "a PDF document"),
    (b"\xd0\xcf\x11\xe0", "an old Microsoft Office file (Excel .xls?)"),
    (b"BZh", "a bzip2 archive (only gzip and zip are unpacked)"),
    (b"7z\xbc\xaf", "a 7-Zip archive (only gzip and zip are unpacked)"),
    (b"Rar!", "a RAR archive (only gzip and zip are unpacked)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
)


@dataclass(frozen=True)
class Document:
    name: str  # "" for the uploaded file itself, else the member's name inside the zip
    stream: BinaryIO
    is_xml: bool
    description: str  # what it is, for a refusal: "UTF-16LE text", "member a.csv of the zip"


def documents(source: StatementSource, *, max_bytes: int) -> Iterator[Document]:
    """Yield the statement documents of an upload, in order. Streams are valid until the next
    document is asked for (temporary files are closed when the generator is).

    Raises ``StatementParseError``: ``empty_file``, ``invalid_container`` (a gzip or zip that
    does not unpack, encrypted, nested, empty or with too many members), ``zip_bomb``,
    ``file_too_large`` (the unpacked bytes pass ``max_bytes``), ``encoding_error``.
    """
    budget = _Budget(max_bytes)
    with ExitStack() as stack:
        outer = _seekable(source, max_bytes, stack)
        head = _peek(outer)
        if not head:
            raise StatementParseError("empty_file", "the file is empty (0 bytes)")
        if head.startswith(_GZIP):
            unpacked = stack.enter_context(_gunzip(outer, budget))
            yield _document(unpacked, name="", where="the gzip file's content", stack=stack)
        elif head.startswith((_ZIP, _EMPTY_ZIP)):
            yield from _unzip(outer, budget, stack)
        else:
            yield _document(outer, name="", where="the file", stack=stack)


def _seekable(source: StatementSource, max_bytes: int, stack: ExitStack) -> BinaryIO:
    """The upload as a stream that can be peeked at and rewound; only a pipe-like one is copied.
    The parsers apply ``max_bytes`` to a plain file again as they read it."""
    if isinstance(source, bytes | bytearray | memoryview):
        if len(source) > max_bytes:
            raise StatementParseError("file_too_large", f"the file has {len(source)} bytes; the limit is {max_bytes}")
        return io.BytesIO(bytes(source))
    if isinstance(source, str | os.PathLike):
        size = os.stat(source).st_size
        if size > max_bytes:
            raise StatementParseError("file_too_large", f"the file has {size} bytes; the limit is {max_bytes}")
        return stack.enter_context(open(source, "rb"))
    if getattr(source, "seekable", lambda: False)():
        return source  # type: ignore[return-value]
    copy = stack.enter_context(_spool())
    with open_limited(source, max_bytes=max_bytes) as limited:
        while chunk := limited.read(_CHUNK):
            copy.write(chunk)
    copy.seek(0)
    return copy


class _Budget:
    def __init__(self, max_bytes: int):
        self.left = max_bytes
        self.max_bytes = max_bytes

    def take(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise StatementParseError(
                "file_too_large", f"the file unpacks to more than {self.max_bytes} bytes; the limit is {self.max_bytes}"
            )


def _peek(stream: BinaryIO, size: int = 512) -> bytes:
    position = stream.tell()
    head = stream.read(size)
    stream.seek(position)
    return head


def _spool() -> BinaryIO:
    return tempfile.SpooledTemporaryFile(max_size=_SPOOL, mode="w+b")  # type: ignore[return-value]


class _gunzip:
    """Inflate into a temporary file, counting against the budget as it goes."""

    def __init__(self, stream: BinaryIO, budget: _Budget):
        self._stream, self._budget = stream, budget
        self._out = _spool()

    def __enter__(self) -> BinaryIO:
        inflater = zlib.decompressobj(wbits=31)
        try:
            while chunk := self._stream.read(_CHUNK):
                data = inflater.decompress(chunk, _CHUNK)
                while True:
                    self._budget.take(len(data))
                    self._out.write(data)
                    if not inflater.unconsumed_tail:
                        break
                    data = inflater.decompress(inflater.unconsumed_tail, _CHUNK)
                if inflater.eof:
                    break
            if not inflater.eof:
                raise StatementParseError(
                    "invalid_container", "a gzip file that cannot be unpacked: it ends before its data does"
                )
        except zlib.error as exc:
            raise StatementParseError("invalid_container", f"a gzip file that cannot be unpacked: {exc}") from exc
        self._out.seek(0)
        if _peek(self._out).startswith((_GZIP, _ZIP, _EMPTY_ZIP)):
            raise StatementParseError("invalid_container", "a gzip file holding another archive; send the statement")
        return self._out

    def __exit__(self, *exc) -> None:
        self._out.close()


def _unzip(stream: BinaryIO, budget: _Budget, stack: ExitStack) -> Iterator[Document]:
    try:
        archive = stack.enter_context(zipfile.ZipFile(stream))
        members = [m for m in archive.infolist() if not m.is_dir() and not _is_junk(m.filename)]
    except zipfile.BadZipFile as exc:
        raise StatementParseError("invalid_container", f"a zip archive that cannot be read: {exc}") from exc
    if not members:
        raise StatementParseError("invalid_container", "a zip archive holding no file")
    if len(members) > MAX_MEMBERS:
        raise StatementParseError("invalid_container", f"a zip archive of {len(members)} files; at most {MAX_MEMBERS}")
    declared = sum(m.file_size for m in members)
    if declared > budget.max_bytes:
        raise StatementParseError(
            "file_too_large", f"the zip archive unpacks to {declared} bytes; the limit is {budget.max_bytes}"
        )
    for member in members:
        if member.flag_bits & 0x1:
            raise StatementParseError("invalid_container", f"zip member {member.filename} is encrypted")
        if member.file_size > MAX_RATIO * max(member.compress_size, 1):
            raise StatementParseError(
                "zip_bomb",
                f"zip member {member.filename} claims {member.file_size} bytes from {member.compress_size}: refused",
            )
    for member in members:
        out = stack.enter_context(_spool())
        try:
            with archive.open(member) as data:
                while chunk := data.read(_CHUNK):
                    budget.take(len(chunk))  # declared sizes can lie: the bytes read are what count
                    out.write(chunk)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise StatementParseError("invalid_container", f"zip member {member.filename} does not unpack: {exc}")
        out.seek(0)
        if _peek(out).startswith((_GZIP, _ZIP, _EMPTY_ZIP)):
            raise StatementParseError("invalid_container", f"zip member {member.filename} is itself an archive")
        yield _document(out, name=member.filename, where=f"zip member {member.filename}", stack=stack)


def _is_junk(name: str) -> bool:
    base = os.path.basename(name)
    return name.startswith("__MACOSX/") or base in {".DS_Store", "Thumbs.db"}


def _document(stream: BinaryIO, *, name: str, where: str, stack: ExitStack) -> Document:
    head = _peek(stream)
    if not head:
        raise StatementParseError("empty_file", f"{where} is empty (0 bytes)")
    for bom, codec, label in _BOMS:
        if head.startswith(bom):
            text_head = head[len(bom) :].decode(codec, errors="ignore").lstrip()
            if not text_head.startswith("<"):
                return Document(name, stream, False, f"{where} ({label} text)")
            return Document(name, stack.enter_context(_to_utf8(stream, bom, codec, where)), True, where)
    is_xml = head.lstrip(codecs.BOM_UTF8 + b" \t\r\n").startswith(b"<") or head.startswith(b"<\x00")
    return Document(name, stream, is_xml, where)


class _to_utf8:
    """Transcode a UTF-16/32 document to UTF-8 (libxml2 reads UTF-32 only with iconv), saying
    so in its XML declaration."""

    def __init__(self, stream: BinaryIO, bom: bytes, codec: str, where: str):
        self._stream, self._bom, self._codec, self._where = stream, bom, codec, where
        self._out = _spool()

    def __enter__(self) -> BinaryIO:
        decoder = codecs.getincrementaldecoder(self._codec)()
        self._stream.read(len(self._bom))
        first = True
        try:
            while True:
                chunk = self._stream.read(_CHUNK)
                text = decoder.decode(chunk, final=not chunk).encode("utf-8")
                if first and text:
                    text = _DECLARED_ENCODING.sub(rb"\1\2UTF-8\2", text, count=1)
                    first = False
                self._out.write(text)
                if not chunk:
                    break
        except UnicodeDecodeError as exc:
            raise StatementParseError("encoding_error", f"{self._where} is not valid {self._codec}: {exc.reason}")
        self._out.seek(0)
        return self._out

    def __exit__(self, *exc) -> None:
        self._out.close()


def describe(head: bytes) -> str:
    """What a file that is not a statement looks like, for the refusal."""
    for signature, what in _SIGNATURES:
        if head.startswith(signature):
            return what
    text = head.decode("utf-8", errors="replace").lstrip()
    if text.startswith(":20:") or "\n:20:" in text[:200] or text.startswith("{1:"):
        return "an MT940 (SWIFT) statement; ask the bank for camt.053"
    if text.startswith(("{", "[")):
        return "JSON"
    printable = sum(c.isprintable() or c in "\r\n\t" for c in text[:200])
    if text and printable < 0.9 * len(text[:200]):
        return "binary data"
    first = text.splitlines()[0][:40] if text else ""
    return f"text starting {first!r}"
