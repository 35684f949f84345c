"""Hostile and broken statement files: refused with a clear error before they can hurt us."""

import io
from pathlib import Path

import pytest

from reconciliation.statements import StatementParseError, parse_camt, validate_camt

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "camt"
NS = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"

XXE = f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE Document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<Document xmlns="{NS}"><BkToCstmrStmt>
  <GrpHdr><MsgId>&xxe;</MsgId></GrpHdr>
</BkToCstmrStmt></Document>
""".encode()

BILLION_LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE Document [\n<!ENTITY lol "lol">\n'
    + b"".join(
        f'<!ENTITY lol{n} "{("&lol" + str(n - 1) + ";") * 10 if n > 1 else "&lol;" * 10}">\n'.encode()
        for n in range(1, 10)
    )
    + f'<!ENTITY lol0 "x">]>\n<Document xmlns="{NS}"><BkToCstmrStmt><GrpHdr><MsgId>&lol9;</MsgId>'.encode()
    + b"</GrpHdr></BkToCstmrStmt></Document>"
)

EXTERNAL_DTD = f"""<?xml version="1.0"?>
<!DOCTYPE Document SYSTEM "http://127.0.0.1:9/evil.dtd">
<Document xmlns="{NS}"><BkToCstmrStmt/></Document>
""".encode()


@pytest.mark.parametrize("payload", [XXE, BILLION_LAUGHS, EXTERNAL_DTD], ids=["xxe", "billion-laughs", "external-dtd"])
def test_any_doctype_is_refused(payload):
    with pytest.raises(StatementParseError) as caught:
        parse_camt(payload)

    assert caught.value.code == "dtd_forbidden"
    assert "root:" not in str(caught.value)  # nothing of /etc/passwd leaks into the message


def test_doctype_is_refused_even_when_the_root_is_not_a_camt_document():
    payload = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'

    with pytest.raises(StatementParseError) as caught:
        parse_camt(payload)

    assert caught.value.code == "dtd_forbidden"


def test_an_undeclared_entity_is_malformed_xml():
    payload = f'<Document xmlns="{NS}"><BkToCstmrStmt><GrpHdr><MsgId>&nope;</MsgId></GrpHdr>'.encode()

    with pytest.raises(StatementParseError) as caught:
        parse_camt(payload + b"</BkToCstmrStmt></Document>")

    assert caught.value.code == "malformed_xml"


def test_oversize_bytes_are_refused_before_parsing():
    # Not even XML: a size check that ran after parsing would report malformed_xml instead.
    payload = b"\x00" * 1025

    with pytest.raises(StatementParseError) as caught:
        parse_camt(payload, max_bytes=1024)

    assert caught.value.code == "file_too_large"


def test_oversize_file_on_disk_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.xml"
    path.write_bytes(b"not xml at all " * 100)

    with pytest.raises(StatementParseError) as caught:
        validate_camt(path, max_bytes=1000)

    assert caught.value.code == "file_too_large"


def test_oversize_stream_of_unknown_size_is_cut_off_while_reading():
    class Pipe:
        """A stream that can neither tell its size nor seek, like a socket."""

        def __init__(self, data: bytes):
            self._data = io.BytesIO(data)

        def read(self, size=-1):
            return self._data.read(size)

    data = (FIXTURES / "camt053.v2.multi.statement.xml").read_bytes()

    with pytest.raises(StatementParseError) as caught:
        parse_camt(Pipe(data), max_bytes=len(data) - 1)
    statements = parse_camt(Pipe(data), max_bytes=len(data))

    assert caught.value.code == "file_too_large"
    assert len(statements) == 2


def test_seekable_upload_is_measured_first():
    data = (FIXTURES / "camt053.v8.xml").read_bytes()
    upload = io.BytesIO(data)

    with pytest.raises(StatementParseError) as caught:
        parse_camt(upload, max_bytes=100)
    position_after_refusal = upload.tell()
    (statement,) = parse_camt(upload)

    assert caught.value.code == "file_too_large"
    assert position_after_refusal == 0  # refused from its size alone, without reading
    assert statement.statement_id == "253EURNL26VAYB8060476890"


def test_truncated_xml_is_malformed_with_a_line():
    data = (FIXTURES / "camt053.v8.xml").read_bytes()[:3000]

    with pytest.raises(StatementParseError) as caught:
        parse_camt(data)

    assert caught.value.code == "malformed_xml"
    assert caught.value.line is not None and caught.value.line > 1


def test_empty_file_is_malformed():
    with pytest.raises(StatementParseError) as caught:
        parse_camt(b"")
    assert caught.value.code == "malformed_xml"


@pytest.mark.parametrize(
    "document",
    [
        '<Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.001.001.09"><CstmrCdtTrfInitn/></Document>',
        '<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.052.001.08"><BkToCstmrAcctRpt/></Document>',
        '<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.01"><BkToCstmrStmt/></Document>',
        "<Document><BkToCstmrStmt/></Document>",
        f'<Statement xmlns="{NS}"><Stmt/></Statement>',
        "<html><body>not a statement</body></html>",
    ],
    ids=["pain001", "camt052", "camt053-v1", "no-namespace", "wrong-root", "html"],
)
def test_documents_that_are_not_supported_camt_are_refused(document):
    with pytest.raises(StatementParseError) as caught:
        parse_camt(document.encode())

    assert caught.value.code == "unsupported_document"


def test_a_str_is_a_path_not_xml_content():
    with pytest.raises(TypeError):
        parse_camt(f'<Document xmlns="{NS}"/>')
