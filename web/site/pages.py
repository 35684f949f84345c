"""The public site's pages (issue 28): one entry per page, read by the URLs, the views (title and
description for the search engines and link previews) and the sitemap, so a page added here is
routed, described and listed in both languages at once."""

from dataclasses import dataclass

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _


@dataclass(frozen=True)
class Page:
    name: str  # URL name in the ``site`` namespace, and the template site/<name>.html
    path: str  # after the language prefix ("" is the home page)
    title: Promise
    description: Promise
    priority: str = "0.5"


PAGES = (
    Page(
        "home",
        "",
        _("JoyBack: pay people instantly for what they do for your brand"),
        _(
            "JoyBack rewards a social action with real money, paid in seconds to a bank account. "
            "Cashback rewards a confirmed purchase. One engine, one payout rail, one set of books."
        ),
        "1.0",
    ),
    Page(
        "joyback",
        "joyback/",
        _("JoyBack: rewards for TikTok, WhatsApp and UGC actions"),
        _(
            "Pay people for a TikTok login, a WhatsApp opt-in, a shared video or a view threshold, "
            "and see what the money bought: reach, content and first-party contacts."
        ),
        "0.9",
    ),
    Page(
        "cashback_api",
        "cashback-api/",
        _("The Cashback API: post-purchase cashback through one API call"),
        _(
            "Send a confirmed purchase, and the buyer is paid to their bank account after the return "
            "window. Sold on its own, with a sandbox to try it free."
        ),
        "0.9",
    ),
    Page(
        "pricing",
        "pricing/",
        _("Pricing: JoyBack and Cashback API packages"),
        _("Packages for JoyBack and the Cashback API: a monthly fee and a fee per reward, free to try in test mode."),
        "0.8",
    ),
    Page(
        "faq",
        "faq/",
        _("Frequently asked questions"),
        _("How JoyBack and Cashback work, who can be paid, how fast, and how the money is accounted for."),
        "0.6",
    ),
    Page("terms", "terms/", _("Terms of service"), _("The terms under which brands use JoyBack."), "0.2"),
    Page(
        "privacy",
        "privacy/",
        _("Privacy policy"),
        _("Which personal data JoyBack processes, why, and for how long."),
        "0.2",
    ),
    Page("imprint", "imprint/", _("Imprint"), _("Who operates JoyBack and how to reach us."), "0.2"),
)

BY_NAME = {page.name: page for page in PAGES}
