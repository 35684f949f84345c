"""What each ops role may do with payouts' models (``core.roles``). Granted by
``PayoutsConfig.ready``."""

# Every role sees people and money.
_SEE = ["payouts.view_payout", "payouts.view_payoutevent", "payouts.view_payoutattempt", "payouts.view_withdrawal"]

GRANTS = {
    "Reviewer": _SEE,
    "Payout approver": [
        *_SEE,
        "payouts.approve_payout",
        "payouts.view_payoutbatch",
        "payouts.approve_payoutbatch",
        "payouts.view_brandbankaccount",
        "payouts.verify_brandbankaccount",
        "payouts.refund_withdrawal",
    ],
    "Reconciler": _SEE,
    "Support": [*_SEE, "payouts.retry_payout", "payouts.cancel_payout"],
    "Finance admin": [*_SEE, "payouts.view_payoutbatch", "payouts.download_payoutbatch", "payouts.view_routerule"],
}
