"""What a person's platform login granted us, kept only while we need to read their content."""

from django.db import models
from django.db.models import Q


class PlatformCredential(models.Model):
    """The tokens a platform login granted (TikTok: access and refresh token), one row per
    platform account, so a rotated refresh token has one home: two submissions of the same
    account never hold copies that a refresh by one would leave dead for the other.

    Both tokens are encrypted (``recipients.crypto``, as the access token always was) and live
    only while a submission of the account is still read: until it is verified, while its views
    are watched, and while a reward for it waits for its re-check before maturing. Then, on the
    platform's deauthorization notice, on a refresh refused for good, and on the person's
    erasure, the tokens are deleted (``campaigns.services.credentials``). The account is named
    only by a keyed fingerprint (``campaigns.selectors.withdrawal_account``).

    ``version`` changes with every write of the pair, and a refresh records its answer only over
    the pair it read; ``refresh_claimed_until`` is the claim of the one worker refreshing it, so
    two workers never both spend the same refresh token (the platform rotates it: the second
    would be refused as if the person had revoked us)."""

    platform = models.CharField(max_length=20)
    account = models.CharField(max_length=64, help_text="Keyed fingerprint of the platform account.")
    access_ciphertext = models.TextField(blank=True, default="")
    access_expires_at = models.DateTimeField(null=True, blank=True)
    refresh_ciphertext = models.TextField(blank=True, default="")
    refresh_expires_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=0)
    refresh_claimed_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["platform", "account"], name="platform_credential_one_per_account"),
            # Tokens no longer kept are deleted with their row; the one blank row is a refused
            # renewal's mark (both tokens blank, until its refusal was recorded: credentials).
            models.CheckConstraint(
                condition=~Q(access_ciphertext="") | Q(refresh_ciphertext=""), name="platform_credential_holds_a_token"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.platform} credential {self.account[:8]}…"
