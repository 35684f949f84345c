from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class ApiScope(models.TextChoices):
    READ = "read", _("Read everything of the brand")
    WRITE = "write", _("Create and change campaigns, rules, people, rewards, webhook endpoints")
    EVENTS = "events", _("Send trigger events")


class ApiKey(models.Model):
    """A brand's partner API key. The client sends ``jbk_<prefix>_<secret>``; only the prefix
    (to find the row and to show in lists) and the sha256 of the secret are stored. The secret is
    32 random bytes, so a fast hash is enough: nobody can brute-force 256 bits, and a slow
    password hash would cost every API request tens of milliseconds."""

    brand = models.ForeignKey("campaigns.Brand", on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=~Q(secret_hash=""), name="api_key_secret_hash_set")]

    def __str__(self) -> str:
        return f"{self.name} ({self.shown_prefix}…)"

    @property
    def shown_prefix(self) -> str:
        """The key's public start as the client sends it: test mode keys read ``jbk_test_``."""
        return f"jbk_{'' if self.brand.livemode else 'test_'}{self.prefix}_"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
