import subprocess
import sys
import threading
from pathlib import Path

import pytest

from payouts.rails import get_rail
from payouts.rails.base import FinalRailError, PayeeMatch, RailStatus, RetryableRailError, SubmitStatus
from payouts.rails.sandbox import SandboxRail, sandbox_store
from tests.payouts.rail_builders import rail_payment

CLOSED = "DE02100100109307118603"
REJECTED = "DE02120300000000202051"
TIMEOUT = "DE02500105170137075030"
DOWN = "DE02300209000106531065"
RETURNED = "DE02200505501015871393"
PENDING = "DE02370502990000684712"
NO_MATCH = "DE02700100800030876808"
CLOSE = "DE88100900001234567892"


@pytest.fixture
def rail(sandbox_memory):
    return SandboxRail(
        failing_ibans={
            CLOSED: "closed_account",
            REJECTED: "rejected:AM04",
            f"{TIMEOUT[:4]} {TIMEOUT[4:]}": "timeout:2",  # configured with a space: normalised on load
            DOWN: "unavailable:2",
            RETURNED: "return:AC04",
            PENDING: "pending:2",
            NO_MATCH: "vop_no_match",
            CLOSE: "vop_close_match:GIULIA ROSSI",
        }
    )


def test_sandbox_is_the_default_rail(sandbox_memory):
    assert isinstance(get_rail(), SandboxRail)
    assert get_rail("sandbox").name == "sandbox"


def test_plain_iban_settles_at_once(rail, sandbox_memory):
    payment = rail_payment()

    result = rail.submit(payment)

    assert result.status is SubmitStatus.SETTLED
    assert rail.status(payment.end_to_end_id).status is RailStatus.SETTLED
    assert sandbox_memory.transfer_count(payment.end_to_end_id) == 1


def test_same_end_to_end_id_twice_is_one_transfer(rail, sandbox_memory):
    payment = rail_payment()

    first, second = rail.submit(payment), rail.submit(payment)

    assert first == second
    assert sandbox_memory.transfer_count(payment.end_to_end_id) == 1
    assert sandbox_memory.submission_count(payment.end_to_end_id) == 2


def test_without_deduplication_the_sandbox_shows_double_submits(sandbox_memory):
    # The mode the engine's tests use to prove *they* never submit twice.
    rail = SandboxRail(failing_ibans={}, deduplicate=False)
    payment = rail_payment()

    rail.submit(payment)
    rail.submit(payment)

    assert sandbox_memory.transfer_count(payment.end_to_end_id) == 2


def test_closed_account_is_a_final_ac04(rail):
    payment = rail_payment(creditor_iban=CLOSED)

    with pytest.raises(FinalRailError) as raised:
        rail.submit(payment)

    assert raised.value.reason_code == "AC04"
    assert "closed" in raised.value.reason_text
    status = rail.status(payment.end_to_end_id)
    assert (status.status, status.reason_code) == (RailStatus.FAILED, "AC04")


def test_rejection_code_is_configurable_and_stays_the_same_on_retry(rail):
    payment = rail_payment(creditor_iban=REJECTED)

    for _ in range(2):
        with pytest.raises(FinalRailError) as raised:
            rail.submit(payment)
        assert raised.value.reason_code == "AM04"


def test_unavailable_rail_records_nothing_until_it_is_back(rail, sandbox_memory):
    payment = rail_payment(creditor_iban=DOWN)

    for _ in range(2):
        with pytest.raises(RetryableRailError):
            rail.submit(payment)
        assert sandbox_memory.transfer_count(payment.end_to_end_id) == 0
        assert rail.status(payment.end_to_end_id).status is RailStatus.UNKNOWN

    assert rail.submit(payment).status is SubmitStatus.SETTLED
    assert sandbox_memory.transfer_count(payment.end_to_end_id) == 1


def test_always_unavailable(sandbox_memory):
    rail = SandboxRail(failing_ibans={DOWN: "unavailable:*"})
    payment = rail_payment(creditor_iban=DOWN)

    for _ in range(5):
        with pytest.raises(RetryableRailError):
            rail.submit(payment)

    assert sandbox_memory.transfer_count(payment.end_to_end_id) == 0


def test_timeout_after_acceptance_keeps_one_transfer_across_retries(rail, sandbox_memory):
    payment = rail_payment(creditor_iban=TIMEOUT)

    for _ in range(2):
        with pytest.raises(RetryableRailError):
            rail.submit(payment)
        # The answer was lost, the transfer was not: asking by end_to_end_id finds it.
        assert rail.status(payment.end_to_end_id).status is RailStatus.SETTLED

    result = rail.submit(payment)

    assert result.status is SubmitStatus.SETTLED
    assert sandbox_memory.transfer_count(payment.end_to_end_id) == 1


def test_return_after_settlement(rail):
    payment = rail_payment(creditor_iban=RETURNED)

    assert rail.submit(payment).status is SubmitStatus.SETTLED
    status = rail.status(payment.end_to_end_id)

    assert (status.status, status.reason_code) == (RailStatus.RETURNED, "AC04")
    assert status.reason_text == "The bank account is closed."


def test_default_return_code_is_ms03(sandbox_memory):
    rail = SandboxRail(failing_ibans={RETURNED: "return"})
    payment = rail_payment(creditor_iban=RETURNED)
    rail.submit(payment)

    assert rail.status(payment.end_to_end_id).reason_code == "MS03"


def test_pending_payment_settles_after_the_configured_number_of_polls(rail):
    payment = rail_payment(creditor_iban=PENDING)

    assert rail.submit(payment).status is SubmitStatus.ACCEPTED
    polls = [rail.status(payment.end_to_end_id).status for _ in range(3)]

    assert polls == [RailStatus.SUBMITTED, RailStatus.SUBMITTED, RailStatus.SETTLED]
    assert rail.submit(payment).status is SubmitStatus.SETTLED


def test_status_of_a_never_submitted_payment_is_unknown(rail):
    assert rail.status("PO-NEVER-SENT").status is RailStatus.UNKNOWN


@pytest.mark.parametrize(
    ("iban", "name", "outcome", "suggestion"),
    [
        ("IT60X0542811101000000123456", "Giulia Rossi", PayeeMatch.MATCH, None),
        (NO_MATCH, "Giulia Rossi", PayeeMatch.NO_MATCH, None),
        (CLOSE, "Giulia Rosi", PayeeMatch.CLOSE_MATCH, "GIULIA ROSSI"),
        ("IT60X0542811101000000123456", "  ", PayeeMatch.NO_MATCH, None),
    ],
)
def test_verification_of_payee(rail, iban, name, outcome, suggestion):
    result = rail.verify_payee(name=name, iban=iban)

    assert (result.outcome, result.suggested_name) == (outcome, suggestion)


def test_failing_ibans_come_from_settings(settings, sandbox_memory):
    settings.SANDBOX_FAILING_IBANS = {CLOSED: "closed_account"}

    with pytest.raises(FinalRailError):
        get_rail("sandbox").submit(rail_payment(creditor_iban=CLOSED))


@pytest.mark.parametrize("on_file", [False, True], ids=["memory", "file"])
def test_concurrent_submits_of_one_payment_make_one_transfer(sandbox_memory, tmp_path, on_file):
    store_path = str(tmp_path / "sandbox.sqlite3") if on_file else None
    rail = SandboxRail(failing_ibans={}, store_path=store_path)
    payment = rail_payment()
    barrier = threading.Barrier(8)
    references, errors = [], []

    def submit():
        barrier.wait()
        try:
            references.append(rail.submit(payment).rail_reference)
        except Exception as exc:  # collected, then asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(set(references)) == 1
    assert rail.store.transfer_count(payment.end_to_end_id) == 1


_CHILD = """
import sys
from payouts.rails.sandbox import SandboxRail
from tests.payouts.rail_builders import rail_payment
rail = SandboxRail(failing_ibans={{}}, store_path=sys.argv[1])
print(rail.submit(rail_payment(end_to_end_id="PO-CHILD-1")).rail_reference)
"""


def test_file_store_is_shared_with_another_process(tmp_path: Path, settings):
    # What a real qcluster worker and the test process do: same file, same transfers.
    path = str(tmp_path / "sandbox.sqlite3")
    settings.SANDBOX_STORE_PATH = path
    project = Path(__file__).resolve().parents[2]

    child = subprocess.run(
        [sys.executable, "-c", _CHILD.format(), path], cwd=project, capture_output=True, text=True, check=True
    )

    store = sandbox_store()
    assert store.path == path
    assert store.transfer_count("PO-CHILD-1") == 1
    rail = SandboxRail(failing_ibans={})
    again = rail.submit(rail_payment(end_to_end_id="PO-CHILD-1"))
    assert again.rail_reference == child.stdout.strip()
    assert store.transfer_count("PO-CHILD-1") == 1
