"""The search index's triggers again: on SQLite, 0013 and 0016 added columns to the
compaction table with defaults, which remakes the table and drops its triggers, so no
compaction written after them was marked for the index. ``reinstall_triggers`` puts them
back and indexes what was written meanwhile (a no-op on PostgreSQL, where they survive)."""

from django.db import migrations


def reinstall(apps, schema_editor):
    from hermes_web.services.search_index import reinstall_triggers

    reinstall_triggers(schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("hermes_web", "0016_prefix_index"),
    ]

    operations = [migrations.RunPython(reinstall, migrations.RunPython.noop, elidable=False)]
