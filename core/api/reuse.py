"""Serializers kept per thread for the hot endpoints.

A DRF serializer deep-copies its declared fields on every new instance, and a ModelSerializer
first builds them from the model: for one event that was more CPU than the rest of the request
around the ingestion. Validating with ``run_validation`` and rendering with ``to_representation``
on one kept instance give the same results (they keep no per-call state) without that cost.
Measured (A/B in one run, bench.ab --api 2000, best of three, on a shared machine): with a new
serializer per use, the bulk endpoint fell to 0.76x (a thousand events validated and rendered per
call) and single POSTs to 0.93x.
"""

import threading

_local = threading.local()


def reused(serializer_class):
    """This thread's instance of ``serializer_class``, built without data or instance."""
    kept = _local.__dict__.setdefault("serializers", {})
    serializer = kept.get(serializer_class)
    if serializer is None:
        serializer = kept[serializer_class] = serializer_class()
    return serializer
