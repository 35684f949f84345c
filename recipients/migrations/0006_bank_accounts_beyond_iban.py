"""Bank accounts beyond IBAN: an account kind (``iban`` or the PSP's local type), a local
account's currency, one ciphertext for either (the IBAN column renamed: existing rows keep their
tokens), and room for a local account's mask. Existing rows are IBANs: the defaults say so."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("recipients", "0005_person_export")]

    operations = [
        migrations.RenameField(model_name="bankaccount", old_name="iban_ciphertext", new_name="ciphertext"),
        migrations.AlterField(
            model_name="bankaccount",
            name="ciphertext",
            field=models.TextField(
                blank=True,
                default="",
                help_text="Fernet token of the IBAN or of the local fields (JSON); blank once erased.",
            ),
        ),
        migrations.AddField(
            model_name="bankaccount", name="kind", field=models.CharField(default="iban", max_length=32)
        ),
        migrations.AddField(
            model_name="bankaccount",
            name="currency",
            field=models.CharField(blank=True, default="", help_text="A local account's currency.", max_length=3),
        ),
        migrations.AlterField(model_name="bankaccount", name="masked", field=models.CharField(max_length=40)),
        migrations.AlterField(
            model_name="identifier",
            name="kind",
            field=models.CharField(
                choices=[
                    ("email", "Email"),
                    ("whatsapp", "WhatsApp"),
                    ("social", "Social account"),
                    ("iban", "Bank account (fingerprint)"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="bankaccount",
            constraint=models.CheckConstraint(
                condition=models.Q(("currency", ""), ("kind", "iban"))
                | models.Q(models.Q(("kind", "iban"), _negated=True), ("currency__regex", "^[A-Z]{3}$")),
                name="bank_account_currency_by_kind",
            ),
        ),
    ]
