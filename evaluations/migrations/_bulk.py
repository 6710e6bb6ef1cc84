"""`CreateTables`: a fresh schema's operations applied at once (the squashed migration's one).

Django applies a migration an operation at a time, and each CreateModel, AddField or AddIndex
re-renders every model related to the one it changes: evalsite's 127 operations took 3 s of
a fresh database's migrate, nearly all of it rendering. This operation changes the state with
all of them before anything is rendered, then creates each table once from the final models,
with its fields, indexes and constraints. Foreign keys to tables not yet created are fine:
SQLite does not check them when a table is created, and PostgreSQL's schema editor adds them
after every table exists (its deferred SQL).

Only for a schema built from nothing: the operations must create their models, and nothing
else may be in between.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.migrations.operations.base import Operation

ALLOWED = (migrations.CreateModel, migrations.AddField, migrations.AddIndex, migrations.AddConstraint)


class CreateTables(Operation):
    reversible = True
    reduces_to_sql = True

    def __init__(self, *operations: Operation) -> None:
        for operation in operations:
            if not isinstance(operation, ALLOWED):
                raise TypeError(f"CreateTables takes {[o.__name__ for o in ALLOWED]}, not {operation!r}")
        self.operations = operations

    def deconstruct(self) -> tuple[str, tuple[Operation, ...], dict[str, Any]]:
        return self.__class__.__qualname__, self.operations, {}

    def _created(self) -> list[str]:
        return [op.name for op in self.operations if isinstance(op, migrations.CreateModel)]

    def state_forwards(self, app_label: str, state: Any) -> None:
        # Rendered apps would be re-rendered after each change; dropped, they are rendered once,
        # when the database step (or the next migration) first asks for them.
        state.__dict__.pop("apps", None)
        for operation in self.operations:
            operation.state_forwards(app_label, state)

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        for name in self._created():
            model = to_state.apps.get_model(app_label, name)
            if self.allow_migrate_model(schema_editor.connection.alias, model):
                schema_editor.create_model(model)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        for name in reversed(self._created()):
            model = from_state.apps.get_model(app_label, name)
            if self.allow_migrate_model(schema_editor.connection.alias, model):
                schema_editor.delete_model(model)

    def describe(self) -> str:
        return f"Create {len(self._created())} tables with their indexes and constraints"

    @property
    def migration_name_fragment(self) -> str:
        return "tables"
