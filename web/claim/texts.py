"""What people read when something stops them: engine reason codes in plain words (EN + IT)."""

from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

REASONS = {
    "campaign_not_active": _("This campaign is not running right now."),
    "outside_campaign_window": _("This campaign is not running right now."),
    "budget_exhausted": _("Sorry: this campaign's budget has run out, so no new rewards can be given."),
    "no_matching_rule": _("This campaign does not reward this action."),
    "cap_person_campaign_count": _("You have already received this reward: it is limited per person."),
    "cap_person_campaign_amount": _("You have already received the most this campaign gives one person."),
    "cap_person_day_count": _("You reached today's limit for this reward. Try again tomorrow."),
    "cap_person_day_amount": _("You reached today's limit for this reward. Try again tomorrow."),
    "cap_person_week_count": _("You reached this week's limit for this reward."),
    "cap_person_week_amount": _("You reached this week's limit for this reward."),
    "cap_iban_campaign_count": _("This bank account has already received this reward."),
    "cap_iban_day_count": _("This bank account reached today's limit for this reward."),
    "cap_campaign_count": _("Sorry: all the rewards of this campaign have been given out."),
    "cap_campaign_day_count": _("Sorry: today's rewards have all been given out. Try again tomorrow."),
    "iban_country_not_allowed": _("This campaign pays only bank accounts from certain countries."),
    "iban_required": _("This campaign needs your IBAN first."),
    "not_a_new_person": _("This campaign is for new customers only."),
    "required_code_missing": _("The video does not carry the campaign's hashtag."),
    "views_below_threshold": _("The video does not have enough views yet."),
}


def reason_text(code: str) -> str:
    return str(REASONS.get(code, _("This action could not be rewarded (%(code)s).") % {"code": code}))


# The IBAN checker's messages (recipients.normalise), listed so they are translated too; the
# formatted ones (with a country or a length in them) stay in English.
IBAN_MESSAGES = [
    gettext_noop("The IBAN is empty."),
    gettext_noop("An IBAN starts with two letters and two digits, then only letters and digits."),
    gettext_noop("The IBAN checksum is wrong: please check it for a typo."),
]
