"""Properties of the pure rule arithmetic and the funding references (hypothesis)."""

from decimal import ROUND_HALF_UP, Decimal

from hypothesis import given
from hypothesis import strategies as st

from campaigns.evaluation import reward_amount
from campaigns.funding_reference import ALPHABET, check_character, funding_reference_is_valid
from campaigns.models import RewardRule


@given(
    purchase=st.integers(min_value=1, max_value=10**9),
    bps=st.integers(min_value=1, max_value=10_000),
    low=st.one_of(st.none(), st.integers(min_value=1, max_value=10_000)),
    span=st.one_of(st.none(), st.integers(min_value=0, max_value=100_000)),
)
def test_percent_reward_is_the_half_up_share_clamped(purchase, bps, low, span):
    high = None if span is None else (low or 1) + span
    rule = RewardRule(trigger="purchase", amount_type="percent", percent_bps=bps, min_minor=low, max_minor=high)
    amount = reward_amount(rule=rule, purchase_amount_minor=purchase, currency="EUR")
    # the exact share in cents, rounded half up once: computed independently of round_to_minor
    share = int((Decimal(purchase) * bps / 10_000).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    expected = max(share, low) if low is not None else share
    expected = min(expected, high) if high is not None else expected
    assert amount == expected


@given(body=st.text(alphabet=ALPHABET, min_size=5, max_size=5), pos=st.integers(0, 5), ch=st.sampled_from(ALPHABET))
def test_a_single_changed_character_is_always_caught(body, pos, ch):
    ref = "JB" + body + check_character(body)
    changed = ref[: 2 + pos] + ch + ref[3 + pos :]
    assert funding_reference_is_valid(changed) == (changed == ref)
