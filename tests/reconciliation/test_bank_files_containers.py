"""Bank files in the encodings and containers customers upload (issue 15): UTF-16/32 with a BOM,
gzip, zip of one or many statements; and a refusal that says what the file was."""

import gzip
import io
import zipfile

import pytest

from reconciliation.models import StatementImport
from reconciliation.services.matching import statement_lines_match
from reconciliation.services.statements import platform_bank_account_create, statement_import
from reconciliation.statements.errors import StatementParseError
from tests.reconciliation.crafted import Booking, books_mirror, camt053, statement

pytestmark = pytest.mark.django_db

XML = camt053(statement([Booking("5.00", reference="A"), Booking("2.50", direction="DBIT", reference="B")]))


@pytest.fixture
def bank():
    return platform_bank_account_create(name="Operating", iban="NL91ABNA0417164300", currency="EUR")


def _import(data: bytes, **kwargs):
    return statement_import(source=data, filename="upload", origin="command", match=False, **kwargs)


def _recode(codec: str, bom: bytes = b"") -> bytes:
    text = XML.decode().replace('encoding="UTF-8"', f'encoding="{codec.upper()}"')
    return bom + text.encode(codec)


def _zip(*members: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "data",
    [
        _recode("utf-16-le", b"\xff\xfe"),
        _recode("utf-16-be", b"\xfe\xff"),
        _recode("utf-32-le", b"\xff\xfe\x00\x00"),
        _recode("utf-32-be", b"\x00\x00\xfe\xff"),
        _recode("utf-16-le"),
        b"\xef\xbb\xbf" + XML,
        gzip.compress(XML),
        _zip(("statement.xml", XML)),
    ],
    ids=["utf16le-bom", "utf16be-bom", "utf32le-bom", "utf32be-bom", "utf16le-no-bom", "utf8-bom", "gzip", "zip"],
)
def test_every_encoding_and_container_imports_the_same_statement(bank, data):
    result = _import(data)
    statement_lines_match()
    assert result.new_lines == 2
    books_mirror(result.statements, entries=2)


def test_a_zip_of_several_statements_imports_each_once(bank):
    second = camt053(statement([Booking("9.00", reference="C")], statement_id="STMT-2"), message_id="MSG-2")
    data = _zip(("day1.xml", XML), ("__MACOSX/._day1.xml", b"\x00junk"), ("day2.xml", second))
    result = _import(data)
    statement_lines_match()
    assert [s.statement_id for s in result.statements] == ["STMT-1", "STMT-2"]
    assert StatementImport.objects.get().lines_count == 3
    books_mirror(result.statements, entries=3)


@pytest.mark.parametrize(
    ("data", "code", "says"),
    [
        (b"", "empty_file", "the file is empty"),
        (_zip(), "invalid_container", "a zip archive holding no file"),
        (_zip(("empty.xml", b"")), "empty_file", "zip member empty.xml is empty"),
        (b"\x1f\x8b\x08\x00garbage", "invalid_container", "a gzip file that cannot be unpacked"),
        (gzip.compress(gzip.compress(XML)), "invalid_container", "a gzip file holding another archive"),
        (
            _zip(
                ("inner.zip", _zip(("s.xml", XML))),
            ),
            "invalid_container",
            "zip member inner.zip is itself an archive",
        ),
        (b"%PDF-1.7\n...", "unsupported_document", "the file is a PDF document"),
        (b":20:STARTUMS\n:25:NL91ABNA0417164300\n", "unsupported_document", "MT940"),
        (gzip.compress(b"Date;Amount\n2026-01-15;5.00\n"), "unsupported_document", "text starting 'Date;Amount'"),
        (_recode("utf-16-le", b"\xff\xfe").replace(b"<\x00", b"#\x00", 1), "unsupported_document", "UTF-16LE text"),
    ],
    ids=["empty", "empty-zip", "empty-member", "bad-gzip", "nested-gzip", "nested-zip", "pdf", "mt940", "csv", "utf16"],
)
def test_a_refusal_says_what_the_file_was_and_imports_nothing(bank, data, code, says):
    with pytest.raises(StatementParseError) as caught:
        _import(data)
    assert caught.value.code == code and says in caught.value.message
    assert StatementImport.objects.count() == 0


def test_a_zip_bomb_is_refused_before_it_is_unpacked(bank):
    with pytest.raises(StatementParseError) as caught:
        _import(_zip(("bomb.xml", b"<" + b" " * 50_000_000)))
    assert caught.value.code == "zip_bomb"


def test_the_size_limit_applies_to_the_unpacked_bytes(bank):
    packed = gzip.compress(XML.replace(b"</Document>", b" " * 200_000 + b"</Document>"))
    assert len(packed) < 10_000
    with pytest.raises(StatementParseError) as caught:
        _import(packed, max_bytes=100_000)
    assert caught.value.code == "file_too_large" and "unpacks to more than 100000 bytes" in caught.value.message
