"""Writes about people (the app's services, one module per concern):

* ``people``: the person resolver, one set-wise algorithm (``people_resolve``; ``person_resolve``
  and ``person_set_iban`` are a batch of one), with the linking rules of ``identity``;
* ``roots``: the one lock helper for person roots and the retry loop of writes about a person;
* ``bank_accounts``: the one writer of a new current account and its ``iban_set`` event;
* ``privacy``: consent, access requests (export) and erasure.
"""

from recipients.services.bank_accounts import bank_account_holder_name_set
from recipients.services.identity import IdentityInput
from recipients.services.people import (
    ComplexBatch,
    Resolved,
    people_resolve,
    person_resolve,
    person_set_iban,
)
from recipients.services.privacy import consent_record, person_erase, person_export
from recipients.services.roots import person_root_lock

__all__ = [
    "ComplexBatch",
    "bank_account_holder_name_set",
    "IdentityInput",
    "Resolved",
    "consent_record",
    "people_resolve",
    "person_erase",
    "person_export",
    "person_resolve",
    "person_root_lock",
    "person_set_iban",
]
