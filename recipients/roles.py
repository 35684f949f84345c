"""What each ops role may do with recipients' models (``core.roles``). Granted by
``RecipientsConfig.ready``."""

# Every role sees people and money.
_SEE = ["recipients.view_person", "recipients.view_personevent"]

GRANTS = {
    "Reviewer": _SEE,
    "Payout approver": _SEE,
    "Reconciler": _SEE,
    "Support": [
        *_SEE,
        "recipients.view_notice",
        "recipients.view_noticedelivery",
        "recipients.erase_person",
        "recipients.export_person",
    ],
    "Finance admin": _SEE,
}
