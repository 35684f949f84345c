import pytest

from payouts.pain002 import Outcome, Pain002Error, parse_pain002

NS03 = "urn:iso:std:iso:20022:tech:xsd:pain.002.001.03"
NS10 = "urn:iso:std:iso:20022:tech:xsd:pain.002.001.10"


def _report(ns: str, *, group: str = "", blocks: str = "") -> bytes:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="{ns}">
  <CstmrPmtStsRpt>
    <GrpHdr><MsgId>BANK-STS-1</MsgId><CreDtTm>2025-01-02T10:00:00</CreDtTm></GrpHdr>
    <OrgnlGrpInfAndSts>
      <OrgnlMsgId>BATCH-42</OrgnlMsgId><OrgnlMsgNmId>pain.001.001.09</OrgnlMsgNmId>{group}
    </OrgnlGrpInfAndSts>{blocks}
  </CstmrPmtStsRpt>
</Document>""".encode()


def _tx(e2e: str, status: str, reason: str = "", info: str = "") -> str:
    rsn = f"<StsRsnInf>{f'<Rsn><Cd>{reason}</Cd></Rsn>' if reason else ''}{info}</StsRsnInf>" if reason or info else ""
    return f"<TxInfAndSts><OrgnlEndToEndId>{e2e}</OrgnlEndToEndId><TxSts>{status}</TxSts>{rsn}</TxInfAndSts>"


MIXED_BLOCK = (
    "<OrgnlPmtInfAndSts><OrgnlPmtInfId>BATCH-42-20250102</OrgnlPmtInfId><PmtInfSts>PART</PmtInfSts>"
    + _tx("PO-1", "ACCP")
    + _tx("PO-2", "ACSC")
    + _tx("PO-3", "RJCT", "AC04")
    + _tx("PO-4", "RJCT", "", "<AddtlInf>Beneficiary unknown</AddtlInf>")
    + "</OrgnlPmtInfAndSts>"
)


@pytest.mark.parametrize("ns", [NS03, NS10])
def test_per_transaction_statuses_with_reasons(ns):
    report = parse_pain002(_report(ns, group="<GrpSts>PART</GrpSts>", blocks=MIXED_BLOCK))

    assert report.version == ns.rsplit(":", 1)[-1]
    assert (report.message_id, report.original_message_id) == ("BANK-STS-1", "BATCH-42")
    assert report.group.outcome is Outcome.PARTIAL
    lines = report.by_end_to_end_id()
    assert [(e2e, t.status, t.reason_code, t.outcome) for e2e, t in lines.items()] == [
        ("PO-1", "ACCP", None, Outcome.ACCEPTED),
        ("PO-2", "ACSC", None, Outcome.SETTLED),
        ("PO-3", "RJCT", "AC04", Outcome.REJECTED),
        ("PO-4", "RJCT", "NARR", Outcome.REJECTED),
    ]
    assert lines["PO-3"].reason_text == "The bank account is closed."
    assert "Beneficiary unknown" in lines["PO-4"].reason_text
    assert lines["PO-1"].original_payment_information_id == "BATCH-42-20250102"
    assert report.payment_informations[0].status == "PART"


def test_whole_file_rejected_at_group_level():
    group = "<GrpSts>RJCT</GrpSts><StsRsnInf><Rsn><Cd>FF01</Cd></Rsn></StsRsnInf>"

    report = parse_pain002(_report(NS10, group=group))

    assert report.transactions == ()
    assert (report.group.status, report.group.reason_code) == ("RJCT", "FF01")
    assert report.group.reason_text == "The payment file or message format is not valid."


def test_rejection_without_any_reason_gets_ms03():
    report = parse_pain002(
        _report(
            NS03, blocks=f"<OrgnlPmtInfAndSts><OrgnlPmtInfId>B</OrgnlPmtInfId>{_tx('PO-9', 'RJCT')}</OrgnlPmtInfAndSts>"
        )
    )

    assert report.transactions[0].reason_code == "MS03"


XXE = b"""<?xml version="1.0"?>
<!DOCTYPE Document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.002.001.10"><CstmrPmtStsRpt><GrpHdr><MsgId>&xxe;</MsgId>
</GrpHdr></CstmrPmtStsRpt></Document>"""

LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.002.001.10"><CstmrPmtStsRpt><GrpHdr><MsgId>&lol3;</MsgId>
</GrpHdr></CstmrPmtStsRpt></Document>"""


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (XXE, "DTD"),
        (LAUGHS, "DTD"),
        (b"<Document><unclosed></Document>", "well-formed"),
        (b"", "well-formed"),
        (_report("urn:iso:std:iso:20022:tech:xsd:pain.001.001.09"), "supported"),
        (_report(NS10).replace(b"<OrgnlMsgId>BATCH-42</OrgnlMsgId>", b""), "OrgnlMsgId"),
        (_report(NS10), "no status"),
        (_report(NS10, group="<GrpSts>WHAT</GrpSts>"), "unknown status"),
        (
            _report(
                NS10,
                blocks=f"<OrgnlPmtInfAndSts><OrgnlPmtInfId>B</OrgnlPmtInfId>{_tx('PO-1', 'ACCP')}"
                f"{_tx('PO-1', 'RJCT', 'AC01')}</OrgnlPmtInfAndSts>",
            ),
            "twice",
        ),
        (
            _report(
                NS10,
                blocks="<OrgnlPmtInfAndSts><OrgnlPmtInfId>B</OrgnlPmtInfId><TxInfAndSts><TxSts>ACCP</TxSts>"
                "</TxInfAndSts></OrgnlPmtInfAndSts>",
            ),
            "no OrgnlEndToEndId",
        ),
    ],
)
def test_malformed_or_unsafe_reports_are_refused_whole(data, message):
    with pytest.raises(Pain002Error, match=message):
        parse_pain002(data)


def test_size_limit():
    data = _report(NS10, group="<GrpSts>ACCP</GrpSts>")

    with pytest.raises(Pain002Error, match="larger than"):
        parse_pain002(data, max_bytes=len(data) - 1)
    assert parse_pain002(data, max_bytes=len(data)).group.status == "ACCP"


def test_one_bad_line_rejects_the_whole_report():
    # Good lines before the bad one must not leak out as a partial result.
    blocks = (
        "<OrgnlPmtInfAndSts><OrgnlPmtInfId>B</OrgnlPmtInfId>"
        + _tx("PO-1", "ACSC")
        + _tx("PO-2", "BOGUS")
        + "</OrgnlPmtInfAndSts>"
    )

    with pytest.raises(Pain002Error, match="PO-2"):
        parse_pain002(_report(NS03, blocks=blocks))
