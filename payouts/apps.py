from django.apps import AppConfig
from django.db.models.signals import post_save


class PayoutsConfig(AppConfig):
    name = "payouts"

    def ready(self) -> None:
        from campaigns.models import Reward
        from payouts import hooks
        from payouts.matchers import MATCHERS
        from payouts.selectors import payout_exceptions
        from recipients.models import BankAccount, PersonEvent
        from reconciliation.bank_selectors import register_exception_source
        from reconciliation.matching import register

        for matcher in MATCHERS:
            register(matcher)
        register_exception_source(payout_exceptions)
        post_save.connect(hooks.reward_saved, sender=Reward, dispatch_uid="payouts.reward_saved")
        post_save.connect(hooks.bank_account_saved, sender=BankAccount, dispatch_uid="payouts.bank_account_saved")
        post_save.connect(hooks.person_event_saved, sender=PersonEvent, dispatch_uid="payouts.person_event_saved")
