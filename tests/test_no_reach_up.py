"""Lower apps never reach up by string (STYLE rule 16): no ``get_model``, no table name and no
dotted module path of a higher app in the source of ``core`` and ``recipients`` (migrations are
history and may name tables). A lower app that must act on a higher app's rows offers a registry
the higher app fills (README "Registries").

A model label in a foreign key (``"campaigns.Brand"``) is the schema, not a reach: it is allowed."""

import io
import re
import tokenize
from pathlib import Path

import pytest
from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
# Each checked app and the apps above it (pyproject.toml's layers; web is the front door to come).
ABOVE = {
    "core": ("reconciliation", "recipients", "campaigns", "payouts", "web"),
    "recipients": ("campaigns", "payouts", "web"),
}

# The WhatsApp sender's production check still names its classes; the platform seam (issue 27)
# moves that check beside the sender, registered from above. Remove these with it.
UNTIL_THE_PLATFORM_SEAM = {
    ("core/checks.py", '"recipients.whatsapp_cloud.FakeWhatsAppSender"'),
    ("core/checks.py", '"recipients.whatsapp_cloud.CloudApiSender"'),
}


def _sources(app: str) -> list[Path]:
    return sorted(p for p in (ROOT / app).rglob("*.py") if "migrations" not in p.relative_to(ROOT).parts)


def _strings(path: Path) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.STRING]


def _tables(labels) -> set[str]:
    found = set()
    for label in labels:
        if label in {c.label for c in apps.get_app_configs()}:
            for model in apps.get_app_config(label).get_models(include_auto_created=True):
                found.add(model._meta.db_table)
    return found


def _reaches(app: str) -> list[tuple[str, int, str, str]]:
    """(file, line, kind, what) of every reach up in ``app``'s source."""
    above = ABOVE[app]
    tables = _tables(above)
    dotted = re.compile(rf"""^[rbuf]*['"]+(?:{"|".join(above)})\.[a-z_][a-z0-9_]*(?:\.\w+)*['"]+$""")
    found = []
    for path in _sources(app):
        where = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "get_model(" in line:
                found.append((where, number, "get_model", line.strip()))
        for number, text in _strings(path):
            names = {t for t in tables if re.search(rf"\b{t}\b", text)}
            if names:
                found.append((where, number, "table name", ", ".join(sorted(names))))
            if dotted.match(text) and (where, text) not in UNTIL_THE_PLATFORM_SEAM:
                found.append((where, number, "dotted path", text))
    return found


@pytest.mark.parametrize("app", ABOVE)
def test_a_lower_app_names_no_table_model_lookup_or_path_of_a_higher_one(app):
    assert _reaches(app) == []


def test_the_check_finds_each_kind_of_reach(tmp_path, monkeypatch):
    """The check itself: each kind of reach, in a throwaway copy of an app, is found; a foreign
    key's model label is not."""
    fake = tmp_path / "recipients"
    fake.mkdir()
    (fake / "reach.py").write_text(
        "from django.apps import apps\n"
        'Payout = apps.get_model("payouts", "Payout")\n'
        'SQL = f"SELECT 1 FROM campaigns_rewardevent WHERE id = {1}"\n'
        'HANDLER = "payouts.whatsapp_webhook.handler"\n'
        'FOREIGN_KEY = "campaigns.Brand"\n'
    )
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert [(line, kind) for _, line, kind, _ in _reaches("recipients")] == [
        (2, "get_model"),
        (3, "table name"),
        (4, "dotted path"),
    ]
