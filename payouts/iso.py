"""ISO 20022 external status reason codes (ExternalStatusReason1Code / ExternalReturnReason1Code)
that payouts meet on SEPA credit transfers and PSP rails, with a plain-language text for ops staff
and for the person being paid.

The texts are ours, written for people; the codes are the ISO ones that pain.002, camt.054 and
the rails report. Codes not listed still pass through: ``reason_text`` then says so plainly.
"""

REASON_CODES: dict[str, str] = {
    "AC01": "The account number (IBAN) is wrong or does not exist.",
    "AC03": "The account number of the receiving bank account is not valid.",
    "AC04": "The bank account is closed.",
    "AC06": "The bank account is blocked.",
    "AC13": "The account type cannot receive this payment.",
    "AG01": "The bank does not allow this kind of payment to this account.",
    "AG02": "The payment was sent with a wrong transaction or operation code.",
    "AM01": "The amount is zero.",
    "AM02": "The amount is higher than the maximum allowed.",
    "AM04": "There was not enough money in the paying account.",
    "AM05": "This payment was already sent (duplicate).",
    "AM09": "The amount is not the one agreed.",
    "BE01": "The name does not match the account holder.",
    "BE04": "The recipient's address is missing or wrong.",
    "BE05": "The party that started the payment is not known.",
    "CNOR": "The receiving bank is not registered for this kind of payment.",
    "CUST": "The payment was cancelled at the request of the payer.",
    "DNOR": "The paying bank is not registered for this kind of payment.",
    "DS02": "The payment order was cancelled.",
    "DT01": "The execution date is not valid.",
    "DUPL": "This payment was sent twice; the duplicate was refused.",
    "ED05": "Settlement of the payment failed.",
    "FF01": "The payment file or message format is not valid.",
    "FOCR": "The payment was returned after a cancellation request.",
    "FRAD": "The payment was stopped on suspicion of fraud.",
    "MD07": "The account holder has died.",
    "MS02": "The recipient refused the payment; no reason was given.",
    "MS03": "The bank refused the payment; no reason was given.",
    "NARR": "The bank gave its reason in free text (see the details).",
    "RC01": "The bank identifier (BIC) is wrong.",
    "RR01": "The payer's account or identification is missing, as required by regulation.",
    "RR02": "The payer's name or address is missing, as required by regulation.",
    "RR03": "The recipient's name or address is missing, as required by regulation.",
    "RR04": "The payment was stopped for regulatory reasons.",
    "SL01": "The receiving bank's own service rules refused the payment.",
    "TM01": "The payment arrived after the bank's cut-off time.",
}

# ISO 20022 "order cancelled": what a pain.001 file never downloaded in time is failed with (the
# instruction was never given, so the money is simply paid again).
EXPIRED_REASON_CODE = "DS02"
# Codes that mean the person's bank details are unusable: the person is asked to correct them
# before the next payout, instead of the payout simply being retried.
ACCOUNT_DETAIL_CODES: frozenset[str] = frozenset({"AC01", "AC03", "AC04", "AC06", "AC13", "BE01", "MD07", "RC01"})


def reason_text(code: str | None) -> str:
    """The plain-language text for a reason code; unknown codes are named, never dropped."""
    if not code:
        return "No reason was given."
    normalised = code.strip().upper()
    return REASON_CODES.get(normalised, f"Reason code {normalised} (not in our table).")


def needs_new_account_details(code: str | None) -> bool:
    """True when the code says the person's account details must change before paying again."""
    return bool(code) and code.strip().upper() in ACCOUNT_DETAIL_CODES
