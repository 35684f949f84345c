import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from recipients.models import Person
from recipients.services import person_export


class Command(BaseCommand):
    help = (
        "Export everything held about a person (and the people merged into them) as JSON: an access "
        "request's answer, with clear identifiers and IBANs. The export is recorded as the person's "
        "'exported' event. Writes to stdout, or to --out."
    )

    def add_arguments(self, parser):
        parser.add_argument("person_id", type=int)
        parser.add_argument("--out", help="write the JSON to this file instead of stdout")
        parser.add_argument("--actor", help="username recorded as who exported (the staff member answering)")

    def handle(self, *args, person_id: int, out: str | None = None, actor: str | None = None, **options):
        try:
            person = Person.objects.get(pk=person_id)
        except Person.DoesNotExist:
            raise CommandError(f"no person #{person_id}")
        user = None
        if actor:
            try:
                user = get_user_model().objects.get(username=actor)
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user {actor!r}")
        text = json.dumps(person_export(person=person, actor=user, source="command"), ensure_ascii=False, indent=2)
        if out:
            with open(out, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
            self.stderr.write(f"Exported person #{person_id} to {out}.")
        else:
            self.stdout.write(text)
