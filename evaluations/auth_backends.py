"""The login backend: Django's ModelBackend, with the user of a logged-in request read by one
hand-written statement.

`get_user` runs on every request of a logged-in user. The ORM's `User.objects.get(pk=...)`
spent more time compiling its SQL than PostgreSQL spent answering it (about a third of a
cached compare page's whole cost); the statement here is fixed, so there is nothing to
compile, and on PostgreSQL it is prepared once per connection.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend as DjangoModelBackend
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import HttpRequest


class ModelBackend(DjangoModelBackend):
    def get_user(self, user_id: Any) -> Any | None:
        user_model = get_user_model()
        meta = user_model._meta
        users = list(user_model._default_manager.raw(
            f"SELECT * FROM {connection.ops.quote_name(meta.db_table)}"  # noqa: S608 - the table's own quoted names
            f" WHERE {connection.ops.quote_name(meta.pk.column)} = %s", [user_id]))
        return users[0] if users and self.user_can_authenticate(users[0]) else None

    def authenticate(self, request: HttpRequest | None, username: str | None = None, password: str | None = None,
                     **kwargs: Any) -> Any | None:
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and password is not None:
            # Django's own ModelBackend stays listed after this one, so that sessions from
            # before this backend existed stay valid; a wrong password ends here rather than
            # being hashed a second time by it.
            raise PermissionDenied
        return user
