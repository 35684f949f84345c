"""Writes about people (the app's services, one module per concern):

* ``identity``: who may link people and change where they are paid; the one-identity slow path;
* ``people``: the person resolver (``people_resolve``, set-wise; ``person_resolve``, a batch of
  one) and ``person_set_iban``;
* ``privacy``: consent, access requests (export) and erasure.
"""

from recipients.services.identity import IdentityInput, person_root_lock
from recipients.services.people import (
    ComplexBatch,
    Resolved,
    bank_account_holder_name_set,
    people_resolve,
    person_resolve,
    person_set_iban,
)
from recipients.services.privacy import consent_record, person_erase, person_export

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
