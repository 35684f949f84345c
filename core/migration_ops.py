"""Migration operations for a live database.

``AddIndexOnline``: an index on a table that takes writes all day (events, rewards, postings) is
built with ``CREATE INDEX CONCURRENTLY`` on PostgreSQL, which does not block the writers while it
builds; elsewhere (the SQLite demo) it is a plain ``AddIndex``. A migration using it sets
``atomic = False`` (PostgreSQL builds such an index outside a transaction) and holds nothing else.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db.migrations.operations import AddIndex


class AddIndexOnline(AddIndexConcurrently):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)
