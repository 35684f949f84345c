from urllib.parse import parse_qs, urlparse

import pytest
import requests

from tests.payouts.payout_fixtures import debtor, sandbox  # noqa: F401 - fixtures
from tests.portal.conftest import brand_a, brand_b, campaign_a, campaign_b, fake_tiktok  # noqa: F401 - fixtures


def tiktok_login(
    client,
    *,
    fake_base: str,
    next_url: str,
    name: str = "Giulia Rossi",
    scope: str = "",
    caption: str = "My new sneakers #joyback",
):
    """Run allauth's TikTok login against the fake: start, 'log in' on the fake's page, come back."""
    start = f"/accounts/tiktok/login/?process=login&next={next_url}" + (f"&scope={scope}" if scope else "")
    response = client.post(start)
    assert response.status_code == 302, response.content[:500]
    query = parse_qs(urlparse(response["Location"]).query)
    back = requests.post(
        f"{fake_base}/v2/auth/authorize/confirm/",
        data={
            "name": name,
            "caption": caption,
            "redirect_uri": query["redirect_uri"][0],
            "state": query["state"][0],
            "scope": query["scope"][0],
        },
        allow_redirects=False,
        timeout=5,
    )
    callback = urlparse(back.headers["Location"])
    return client.get(f"{callback.path}?{callback.query}")


@pytest.fixture(autouse=True)
def _fresh_cache():
    from django.core.cache import cache

    cache.clear()
