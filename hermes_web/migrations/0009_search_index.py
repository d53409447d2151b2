"""The search index (issue #35): an FTS5 trigram table on SQLite, a pg_trgm-indexed table on
PostgreSQL, kept current by triggers on the message and compaction tables; rows already stored
are indexed here. The SQL lives in ``hermes_web.services.search_index``."""

from django.db import migrations


def create(apps, schema_editor):
    from hermes_web.services.search_index import install

    install(schema_editor)


def drop(apps, schema_editor):
    from hermes_web.services.search_index import install

    install(schema_editor, reverse=True)


class Migration(migrations.Migration):
    dependencies = [
        ("hermes_web", "0008_fate_recall_test"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
