"""A fake Verification of Payee service speaking the EPC VOP scheme's API (Inter-PSP API
Specifications, 2024): ``POST /vop/v1/payee-verifications`` with the ``X-Request-ID`` (UUID) and
``X-Request-Timestamp`` headers and a body of ``party.name``, ``partyAccount.iban``,
``partyAgent`` and ``requestingAgent`` (``financialInstitutionId.bicFi``); it answers
``partyNameMatch`` MTCH / CMTC / NMTC / NOAP with the ``X-Request-ID`` echoed, and
``matchedName`` (the holder's name) with a close match only.

The bank's records are what a test registers with ``holder(iban, name)``; an IBAN nobody
registered belongs to a bank outside the scheme (NOAP). Matching follows the EPC's examples:
case, accents, punctuation, titles and word order do not matter (MTCH); initials for first names
or one or two typos make a close match (CMTC); anything else is NMTC.
"""

import re
import unicodedata
import uuid
from datetime import UTC, datetime

from tests.fakes.json_server import ApiProblem, FakeJsonServer, Request

TITLES = {"mr", "mrs", "ms", "miss", "dr", "sig", "sigra", "dott", "ssa"}


def _words(name: str) -> list[str]:
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    return [w for w in re.sub(r"[^a-z0-9 ]+", " ", plain).split() if w not in TITLES]


def _distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[-1]


def match(requested: str, holder: str) -> str:
    asked, held = sorted(_words(requested)), sorted(_words(holder))
    if asked and asked == held:
        return "MTCH"
    if not asked:
        return "NMTC"
    # Initials for first names ("G. Rossi" for "Giulia Rossi"): same surname, initials agree.
    asked_full, held_full = _words(requested), _words(holder)
    same_shape = asked_full and held_full and asked_full[-1] == held_full[-1] and len(asked_full) == len(held_full)
    if same_shape and all(
        a == h or (len(a) == 1 and h.startswith(a)) for a, h in zip(asked_full, held_full, strict=True)
    ):
        return "CMTC"
    if _distance(" ".join(asked), " ".join(held)) <= 2:
        return "CMTC"
    return "NMTC"


def _bic(body: dict, party: str) -> str:
    return str(((body.get(party) or {}).get("financialInstitutionId") or {}).get("bicFi") or "")


class FakeVop(FakeJsonServer):
    name = "vop"

    def __init__(self, *, token: str = "test-vop-token"):  # noqa: S107 - a fake's token
        super().__init__()
        self.token = token
        self.holders: dict[str, str] = {}
        self.routes = [("POST", re.compile(r"/vop/v1/payee-verifications"), self._verify)]

    def holder(self, iban: str, name: str) -> None:
        with self.lock:
            self.holders[iban.replace(" ", "").upper()] = name

    def authenticate(self, request: Request) -> None:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            raise ApiProblem(401, {"status": 401, "title": "Unauthorized", "detail": "A valid token is required."})

    def _verify(self, request: Request):
        request_id = request.headers.get("x-request-id", "")
        try:
            uuid.UUID(request_id)
            datetime.fromisoformat(request.headers.get("x-request-timestamp", "").replace("Z", "+00:00"))
        except ValueError:
            raise ApiProblem(
                400, {"status": 400, "title": "Bad request", "detail": "X-Request-ID and X-Request-Timestamp required."}
            ) from None
        body = request.json()
        name = str((body.get("party") or {}).get("name") or "")
        iban = str((body.get("partyAccount") or {}).get("iban") or "").replace(" ", "").upper()
        if not name or not iban or not _bic(body, "partyAgent") or not _bic(body, "requestingAgent"):
            raise ApiProblem(
                400,
                {"status": 400, "title": "Bad request", "detail": "party, partyAccount and both agents are required."},
                {"X-Request-ID": request_id},
            )
        with self.lock:
            holder = self.holders.get(iban)
        if holder is None:
            answer = {"partyNameMatch": "NOAP"}
        else:
            result = match(name, holder)
            answer = {"partyNameMatch": result, **({"matchedName": holder} if result == "CMTC" else {})}
        headers = {"X-Request-ID": request_id, "X-Response-Timestamp": datetime.now(UTC).isoformat()}
        return 200, answer, headers
