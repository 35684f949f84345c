"""Verification-of-Payee codes in pain.002 status reports (issue 15): German banks send RCVC,
RVMC, RVNM, RVNA per payment (as the status or its reason) and RCVC/RVCM/RVNC for the group;
they were refused as "unknown status". Each maps to the payout's VoP result."""

import pytest

from payouts.pain002 import Outcome, parse_pain002
from payouts.rails.base import PayeeMatch

NS = {
    "03": "urn:iso:std:iso:20022:tech:xsd:pain.002.001.03",
    "10": "urn:iso:std:iso:20022:tech:xsd:pain.002.001.10",
}


def _report(version: str, group: str, transactions: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Document xmlns="{NS[version]}"><CstmrPmtStsRpt>'
        "<GrpHdr><MsgId>VOP-1</MsgId><CreDtTm>2026-01-15T10:00:00+01:00</CreDtTm></GrpHdr>"
        f"<OrgnlGrpInfAndSts><OrgnlMsgId>BATCH-7</OrgnlMsgId><OrgnlMsgNmId>pain.001.001.09</OrgnlMsgNmId>"
        f"<GrpSts>{group}</GrpSts></OrgnlGrpInfAndSts>"
        f"<OrgnlPmtInfAndSts><OrgnlPmtInfId>BATCH-7-20260115</OrgnlPmtInfId>{transactions}</OrgnlPmtInfAndSts>"
        "</CstmrPmtStsRpt></Document>"
    ).encode()


def _tx(e2e: str, status: str, reason: str = "") -> str:
    why = f"<StsRsnInf><Rsn><Cd>{reason}</Cd></Rsn></StsRsnInf>" if reason else ""
    return f"<TxInfAndSts><OrgnlEndToEndId>{e2e}</OrgnlEndToEndId><TxSts>{status}</TxSts>{why}</TxInfAndSts>"


@pytest.mark.parametrize("version", ["03", "10"])
def test_vop_statuses_per_payment_map_to_the_payouts_vop_result(version):
    transactions = _tx("PO-1", "RCVC") + _tx("PO-2", "RVMC") + _tx("PO-3", "RVNM") + _tx("PO-4", "RVNA")
    report = parse_pain002(_report(version, "RVCM", transactions))

    assert report.vop_results() == {
        "PO-1": PayeeMatch.MATCH,
        "PO-2": PayeeMatch.CLOSE_MATCH,
        "PO-3": PayeeMatch.NO_MATCH,
        "PO-4": PayeeMatch.NOT_POSSIBLE,
    }
    # A VoP result says nothing about payment: no payout is settled or failed by it.
    assert {tx.outcome for tx in report.transactions} == {Outcome.RECEIVED}
    assert report.group.outcome is Outcome.RECEIVED and report.group.vop_result is None
    assert (
        report.by_end_to_end_id()["PO-3"].reason_text == "Verification of Payee: the name does not match the account."
    )


def test_vop_codes_as_reasons_beside_a_payment_status():
    transactions = _tx("PO-1", "ACSP", "RVMC") + _tx("PO-2", "RJCT", "RVNM") + _tx("PO-3", "ACSP", "PN02")
    report = parse_pain002(_report("10", "PART", transactions))
    lines = report.by_end_to_end_id()
    assert [(lines[e].outcome, lines[e].vop_result) for e in ("PO-1", "PO-2", "PO-3")] == [
        (Outcome.ACCEPTED, PayeeMatch.CLOSE_MATCH),
        (Outcome.REJECTED, PayeeMatch.NO_MATCH),
        (Outcome.ACCEPTED, PayeeMatch.CLOSE_MATCH),
    ]


def test_a_group_rcvc_means_every_payment_matched():
    report = parse_pain002(_report("10", "RCVC", _tx("PO-1", "ACSP") + _tx("PO-2", "ACSP")))
    assert report.vop_results() == {"PO-1": PayeeMatch.MATCH, "PO-2": PayeeMatch.MATCH}


def test_a_pending_verification_gives_no_result_yet():
    report = parse_pain002(_report("10", "RVNC", _tx("PO-1", "PDNG")))
    assert report.vop_results() == {} and report.group.reason_text == "Verification of Payee is not complete yet."
