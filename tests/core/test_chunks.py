"""core.chunks: a scan that sees every row, a chunk per query, with or without server-side cursors."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.models import OrmQ

from core.chunks import rows_by_key

pytestmark = pytest.mark.django_db


def test_every_row_once_in_key_order_a_chunk_per_query():
    rows = OrmQ.objects.bulk_create(OrmQ(key="money", payload=str(n)) for n in range(7))
    with CaptureQueriesContext(connection) as queries:
        seen = [row.payload for row in rows_by_key(OrmQ.objects.filter(key="money"), size=3)]
    assert seen == [row.payload for row in sorted(rows, key=lambda r: r.pk)]
    assert len(queries) == 3  # 3 + 3 + 1


def test_an_exact_multiple_ends_with_an_empty_page_and_nothing_is_empty():
    OrmQ.objects.bulk_create(OrmQ(key="money", payload=str(n)) for n in range(4))
    assert len(list(rows_by_key(OrmQ.objects.all(), size=2))) == 4
    assert list(rows_by_key(OrmQ.objects.none(), size=2)) == []
