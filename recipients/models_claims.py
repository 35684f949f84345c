"""One-time codes that complete a WhatsApp opt-in: the claim page shows the code, the person
sends it to the brand's WhatsApp number, and the signed inbound message proves they own that
number (``payouts.whatsapp_webhook``)."""

from django.db import models
from django.db.models import Q


class WhatsAppOptInCode(models.Model):
    code = models.CharField(max_length=16, unique=True)
    campaign = models.ForeignKey("campaigns.Campaign", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_message_id = models.CharField(max_length=200, blank=True, default="")
    person = models.ForeignKey(
        "recipients.Person", null=True, blank=True, on_delete=models.PROTECT, related_name="whatsapp_codes"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(used_at__isnull=True, used_message_id="")
                | Q(used_at__isnull=False, person__isnull=False) & ~Q(used_message_id=""),
                name="whatsapp_code_used_coherent",
            ),
            models.CheckConstraint(condition=Q(expires_at__gt=models.F("created_at")), name="whatsapp_code_expires"),
        ]

    def __str__(self) -> str:
        return f"WhatsApp code {self.code}"
