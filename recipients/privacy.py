"""Recipients' personal data declared to the personal-data registry (``core.personal_data``):
marketing consents. (People, identifiers, bank accounts and terms consents are erased by
``recipients.services.privacy`` itself.) Registered by ``RecipientsConfig.ready``, so erasure,
retention and access requests cover marketing consents like any other table.

Erasure ends an active consent (``erasure``, with its event: the brand's webhook says the contact
is gone) and blanks every consent's proof; the brand's Contacts page and API lose the person at
once. Retention blanks the proof of a withdrawn consent ``RETENTION_CONSENT_PROOF_DAYS`` after
the withdrawal; an active consent keeps it (it is what shows the "yes" was given). A pending
consent (double opt-in) is erased like any other (cancelled, silently: the brand never knew of
it); one never confirmed keeps its proof as long after its deadline, to answer a complaint about
the one confirmation e-mail it sent, then loses it (its own retention entry, as the period runs
from another date)."""

from django.db.models import Q

from core.personal_data import BLANK, Erasure, PersonalData, Retention
from recipients.models_consent import PENDING, MarketingConsent
from recipients.services.consent import consents_close_erased


def _marketing_consents_erase(erasure: Erasure) -> dict[str, int]:
    return {"marketing_consents": consents_close_erased(cluster=erasure.cluster, now=erasure.now)}


PERSONAL_DATA = (
    PersonalData(
        kind="marketing_consents",
        model=MarketingConsent,
        blank={"ip_hash": "", "user_agent": ""},
        erase=_marketing_consents_erase,
        retention=Retention(
            kind="marketing_consent_proofs",
            setting="RETENTION_CONSENT_PROOF_DAYS",
            default_days=1095,
            date_field="withdrawn_at",
            purge=BLANK,
            scope=Q(withdrawn_at__isnull=False),
        ),
        export=(
            "id",
            "brand_id",
            "text",
            "text_version",
            "language",
            "channel",
            "given_at",
            "ip_hash",
            "user_agent",
            "claim_link_id",
            "confirmed_at",
            "confirm_by",
            "withdrawn_at",
            "withdrawal_channel",
        ),
    ),
    PersonalData(
        kind="marketing_consents_unconfirmed",
        model=MarketingConsent,
        blank={"ip_hash": "", "user_agent": ""},
        retention=Retention(
            kind="marketing_consent_unconfirmed_proofs",
            setting="RETENTION_CONSENT_PROOF_DAYS",
            default_days=1095,
            date_field="confirm_by",
            purge=BLANK,
            scope=PENDING,
        ),
    ),
)
