"""Writes for payouts (see each module): ``create`` (from payable rewards), ``execute`` (claim,
rail, record, poll, recover), ``payee`` (Verification of Payee, the campaigns' policy, the
person's confirmation or correction), ``actions`` (staff actions, returns, bank settlement),
``batches`` (pain.001 files), ``states`` (the state machine and its ledger entries),
``unclaimed`` (reminders, then money nobody gave an account for goes back), ``paypal`` (PayPal
as a destination: offered where a campaign allows it; its item events)."""

from payouts.services.actions import (
    payout_approve,
    payout_bank_debit_record,
    payout_bank_debit_undo,
    payout_bank_return_record,
    payout_bank_return_undo,
    payout_cancel,
    payout_mark_returned,
    payout_mark_settled,
    payout_retry,
    payout_rewards_mark_paid,
    payouts_bank_debits_record,
)
from payouts.services.batches import (
    payout_batch_apply_pain002,
    payout_batch_approve,
    payout_batch_create,
    payout_batch_download,
    payout_batches_expire,
)
from payouts.services.create import CreateResult, payouts_create_for_payable
from payouts.services.execute import (
    payout_apply_rail_status,
    payout_execute,
    payouts_enqueue_due,
    payouts_poll,
    payouts_recover_stale,
)
from payouts.services.payee import (
    payout_payee_confirm,
    payouts_payee_recheck,
    payouts_payee_recheck_moved,
    payouts_payee_verify,
    payouts_waiting_for_person,
)
from payouts.services.states import in_transit_account
from payouts.services.unclaimed import UnclaimedResult, rewards_unclaimed_process

__all__ = [
    "CreateResult",
    "UnclaimedResult",
    "in_transit_account",
    "payout_apply_rail_status",
    "payout_approve",
    "payout_bank_debit_record",
    "payouts_bank_debits_record",
    "payout_bank_debit_undo",
    "payout_bank_return_record",
    "payout_bank_return_undo",
    "payout_batch_apply_pain002",
    "payout_batch_approve",
    "payout_batch_create",
    "payout_batch_download",
    "payout_batches_expire",
    "payout_cancel",
    "payout_execute",
    "payout_mark_returned",
    "payout_mark_settled",
    "payout_payee_confirm",
    "payout_retry",
    "payout_rewards_mark_paid",
    "payouts_create_for_payable",
    "payouts_enqueue_due",
    "payouts_payee_recheck",
    "payouts_payee_recheck_moved",
    "payouts_payee_verify",
    "payouts_poll",
    "payouts_recover_stale",
    "payouts_waiting_for_person",
    "rewards_unclaimed_process",
]
