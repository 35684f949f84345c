"""Writes only the portal makes: a brand for a new sign-up, team invitations and memberships,
campaign edits and rule changes. Money moves through ``campaigns.services`` (allocate, launch …)."""

import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext as _

from campaigns.models import (
    UNDO_POLICY_FIELDS,
    Brand,
    BrandInvitation,
    BrandMembership,
    BrandRole,
    Campaign,
    CampaignEvent,
    CampaignStatus,
    InvitationStatus,
    RewardRule,
)
from campaigns.services import brand_create, brand_membership_set, rule_create
from core.exceptions import Conflict, InvalidInput, InvalidTransition, PermissionDenied

INVITATION_DAYS = 14
# Fields a live campaign may still change; the rest (mode, currency, start) define what people
# were promised and are fixed at launch. A shorter claim window never takes money sooner than
# the date a reminder told the person (payouts.services.unclaimed).
LIVE_EDITABLE = (
    "name",
    "ends_at",
    "payout_mode",
    "aggregate_minutes",
    "min_payout_minor",
    "vop_no_match",
    "vop_close_match",
    "vop_not_possible",
    "claim_window_days",
    "buyer_claim_links",
    # What voids a held reward is checked when it matures: a change applies to what matures next.
    *UNDO_POLICY_FIELDS,
)


def brand_register(*, user, name: str, default_currency: str = "EUR") -> Brand:
    """A new brand with ``user`` as its owner, in one transaction. A taken slug gets a suffix.
    Raises InvalidInput (name, currency)."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise InvalidInput(_("A brand needs a name of 1 to 200 characters."), code="invalid_name")
    base = slugify(name)[:70] or "brand"
    with transaction.atomic(durable=True):
        slug, n = base, 1
        while Brand.objects.filter(slug=slug).exists():
            n += 1
            slug = f"{base}-{n}"
        brand = brand_create(name=name, slug=slug, default_currency=default_currency, live=False)
        brand_membership_set(brand=brand, user=user, role=BrandRole.OWNER)
    return brand


def invitation_create(*, brand: Brand, email: str, role: str, invited_by, accept_url_base: str) -> BrandInvitation:
    """Invite ``email`` to the brand with ``role`` and email the link after the commit, in the
    active language (the inviter's: the invitee's is not known yet).

    Raises InvalidInput (role), Conflict (``already_member``, ``already_invited``),
    PermissionDenied (``test_mode``: a test tenant has no team of its own)."""
    email = (email or "").strip().lower()
    if not brand.livemode:
        raise PermissionDenied(_("Test mode shares the live brand's team: invite people there."), code="test_mode")
    if role not in BrandRole.values:
        raise InvalidInput(_("Unknown role “%(role)s”.") % {"role": role}, code="invalid_role")
    if BrandMembership.objects.filter(brand=brand, user__email__iexact=email).exists():
        raise Conflict(_("%(email)s is already in the team.") % {"email": email}, code="already_member")
    try:
        with transaction.atomic(durable=True):
            invitation = BrandInvitation.objects.create(
                brand=brand,
                email=email,
                role=role,
                token=secrets.token_urlsafe(32),
                invited_by=invited_by,
                expires_at=timezone.now() + timedelta(days=INVITATION_DAYS),
            )
            link = f"{accept_url_base.rstrip('/')}/{invitation.token}/"
            # Worded now, while the request's language is active; sent after the commit.
            subject = _("[JoyBack] Join %(brand)s on JoyBack") % {"brand": brand.name}
            body = _(
                "%(inviter)s invited you to %(brand)s as %(role)s.\n\n"
                "Accept: %(link)s\n\nThe link works for %(days)s days."
            ) % {
                "inviter": invited_by.email or invited_by.get_username(),
                "brand": brand.name,
                "role": BrandRole(role).label,
                "link": link,
                "days": INVITATION_DAYS,
            }
            transaction.on_commit(
                lambda: send_mail(
                    subject=subject,
                    message=body,
                    from_email=settings.DEFAULT_FROM_EMAIL,
                    recipient_list=[email],
                )
            )
    except IntegrityError as exc:
        raise Conflict(
            _("%(email)s has a pending invitation already.") % {"email": email}, code="already_invited"
        ) from exc
    return invitation


def invitation_accept(*, token: str, user) -> BrandMembership:
    """Join the brand of a pending, unexpired invitation addressed to one of the user's verified
    emails. A conditional UPDATE decides a double click. Raises InvalidTransition
    (``invitation_invalid``), PermissionDenied (``invitation_other_email``)."""
    from allauth.account.models import EmailAddress

    invitation = BrandInvitation.objects.select_related("brand").filter(token=token).first()
    if invitation is None or invitation.status != InvitationStatus.PENDING or invitation.expires_at < timezone.now():
        raise InvalidTransition(_("This invitation is no longer valid."), code="invitation_invalid")
    verified = EmailAddress.objects.filter(user=user, email__iexact=invitation.email, verified=True).exists()
    if not verified:
        raise PermissionDenied(
            _("This invitation is for %(email)s; sign in with that address.") % {"email": invitation.email},
            code="invitation_other_email",
        )
    with transaction.atomic(durable=True):
        changed = BrandInvitation.objects.filter(pk=invitation.pk, status=InvitationStatus.PENDING).update(
            status=InvitationStatus.ACCEPTED, accepted_by=user, decided_at=timezone.now()
        )
        if changed != 1:
            raise InvalidTransition(_("This invitation is no longer valid."), code="invitation_invalid")
        existing = BrandMembership.objects.filter(brand=invitation.brand, user=user).first()
        if existing:
            return existing
        return brand_membership_set(brand=invitation.brand, user=user, role=invitation.role)


def invitation_revoke(*, invitation: BrandInvitation) -> BrandInvitation:
    changed = BrandInvitation.objects.filter(pk=invitation.pk, status=InvitationStatus.PENDING).update(
        status=InvitationStatus.REVOKED, decided_at=timezone.now()
    )
    if changed != 1:
        raise InvalidTransition(_("Only a pending invitation can be revoked."), code="invitation_not_pending")
    invitation.refresh_from_db()
    return invitation


def membership_change(*, membership: BrandMembership, role: str | None, actor) -> BrandMembership | None:
    """Change a member's role, or remove them (``role=None``). The brand always keeps an owner:
    the last owner can be neither demoted nor removed (InvalidTransition ``last_owner``)."""
    if role is not None and role not in BrandRole.values:
        raise InvalidInput(_("Unknown role “%(role)s”.") % {"role": role}, code="invalid_role")
    with transaction.atomic(durable=True):
        owners = list(
            BrandMembership.objects.select_for_update()
            .filter(brand_id=membership.brand_id, role=BrandRole.OWNER)
            .values_list("pk", flat=True)
        )
        if owners == [membership.pk] and role != BrandRole.OWNER:
            raise InvalidTransition(_("A brand needs at least one owner."), code="last_owner")
        if role is None:
            BrandMembership.objects.filter(pk=membership.pk).delete()
            return None
        BrandMembership.objects.filter(pk=membership.pk).update(role=role)
    membership.refresh_from_db()
    return membership


def campaign_update(*, campaign: Campaign, actor, **fields) -> Campaign:
    """Edit a campaign's settings: anything while it is a draft, only ``LIVE_EDITABLE`` fields
    afterwards (InvalidTransition ``campaign_live``). Validated with ``full_clean`` (InvalidInput).
    Writes a ``campaign.updated`` audit row with the changed field names."""
    if campaign.status == CampaignStatus.CLOSED:
        raise InvalidTransition(_("A closed campaign cannot change."), code="campaign_closed")
    if campaign.status != CampaignStatus.DRAFT:
        fixed = sorted(k for k, v in fields.items() if k not in LIVE_EDITABLE and getattr(campaign, k) != v)
        if fixed:
            raise InvalidTransition(
                _("Once launched, these cannot change: %(fields)s.") % {"fields": ", ".join(fixed)},
                code="campaign_live",
                details={"fields": fixed},
            )
    changed = sorted(k for k, v in fields.items() if getattr(campaign, k) != v)
    for key, value in fields.items():
        setattr(campaign, key, value)
    try:
        campaign.full_clean(exclude=["budget_account"])
    except ValidationError as exc:
        raise InvalidInput("; ".join(exc.messages), code="validation_error", details=exc.message_dict) from exc
    with transaction.atomic(durable=True):
        campaign.save(update_fields=[*fields.keys()] or None)
        CampaignEvent.objects.create(
            campaign=campaign, kind="campaign.updated", to_status=campaign.status, actor=actor, data={"fields": changed}
        )
    return campaign


def rule_replace(*, rule: RewardRule, actor, **fields) -> RewardRule:
    """Change a rule by retiring it and adding its successor in one transaction (rewards keep
    pointing at the rule they were earned under). Only while the campaign is a draft: a live
    rule's caps count its own rewards, and restarting them would break a promise."""
    campaign = rule.campaign
    if campaign.status != CampaignStatus.DRAFT:
        raise InvalidTransition(
            _("Rules of a launched campaign cannot change; retire one instead."), code="campaign_live"
        )
    with transaction.atomic(durable=True):
        RewardRule.objects.filter(pk=rule.pk).update(is_active=False)
        new = rule_create(campaign=campaign, **fields)
        CampaignEvent.objects.create(
            campaign=campaign,
            kind="campaign.rule_replaced",
            to_status=campaign.status,
            actor=actor,
            data={"old_rule": rule.pk, "new_rule": new.pk},
        )
    return new


def rule_retire(*, rule: RewardRule, actor) -> RewardRule:
    """Stop a rule paying new rewards (rewards already earned are untouched). A live campaign keeps
    at least one active rule: pause or end it instead (InvalidTransition ``last_rule``)."""
    campaign = rule.campaign
    with transaction.atomic(durable=True):
        active = RewardRule.objects.select_for_update().filter(campaign=campaign, is_active=True)
        if campaign.status != CampaignStatus.DRAFT and list(active.values_list("pk", flat=True)) == [rule.pk]:
            raise InvalidTransition(_("A live campaign needs one active rule; pause or end it."), code="last_rule")
        if RewardRule.objects.filter(pk=rule.pk, is_active=True).update(is_active=False) != 1:
            raise InvalidTransition(_("This rule is retired already."), code="rule_inactive")
        CampaignEvent.objects.create(
            campaign=campaign,
            kind="campaign.rule_retired",
            to_status=campaign.status,
            actor=actor,
            data={"rule": rule.pk},
        )
    rule.refresh_from_db()
    return rule
