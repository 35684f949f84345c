"""Which brand registered which person through the partner API. People a brand knows from its
events and rewards need no row here: ``recipients.brand_people`` derives those."""

from django.db import models


class BrandPerson(models.Model):
    brand = models.ForeignKey("campaigns.Brand", on_delete=models.CASCADE, related_name="+")
    person = models.ForeignKey("recipients.Person", on_delete=models.PROTECT, related_name="brand_links")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["brand", "person"], name="brand_person_unique")]

    def __str__(self) -> str:
        return f"person #{self.person_id} of brand #{self.brand_id}"
