"""python manage.py tokens ...: API tokens made on the server, for a script that provisions a
CI job (the API mints tokens from a signed-in browser session only).

    tokens create --user NAME [--name LABEL]   prints the token, this once (only its digest is kept)
    tokens list --user NAME                    the user's tokens: id, name, prefix, created, last used, state
    tokens revoke --user NAME ID               revoke one of the user's tokens

Whoever runs manage.py holds the server's database, so no password is asked; each token is
recorded in the activity feed as the user's, made with manage.py."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluations.accounts.tokens import token_create, token_revoke
from evaluations.models import ApiToken

DEFAULT_NAME = "manage.py tokens"


class Command(BaseCommand):
    help = "API tokens: create (printed once), list, revoke."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="make a token and print it (only this once)")
        create.add_argument("--user", required=True, help="the username the token acts as")
        create.add_argument("--name", default=DEFAULT_NAME, help="what the token is for (shown in lists)")
        listing = sub.add_parser("list", help="the user's tokens (never their secrets)")
        listing.add_argument("--user", required=True)
        revoke = sub.add_parser("revoke", help="revoke one of the user's tokens")
        revoke.add_argument("--user", required=True)
        revoke.add_argument("id", type=int, help="the token's id (from `tokens list`)")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["user"]
        user = get_user_model().objects.filter(username=name).first()
        if user is None:
            raise CommandError(f"no user {name!r}")
        if options["action"] == "create":
            if not user.is_active:
                raise CommandError(f"{name} is deactivated: a token of theirs would not work")
            label = (options["name"] or "").strip()[:100]
            if not label:
                raise CommandError("--name cannot be empty")
            new = token_create(user=user, name=label, via="manage.py tokens")
            self.stdout.write(new.secret)
            self.stderr.write(f"token {new.token.pk} ({label!r}) for {name}: shown only this once, keep it now")
        elif options["action"] == "list":
            for token in ApiToken.objects.filter(user=user).order_by("pk"):
                state = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "active"
                used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
                self.stdout.write(f"{token.pk}\t{token.name}\t{token.prefix}…\t"
                                  f"created {token.created_at:%Y-%m-%d %H:%M}\tlast used {used}\t{state}")
        else:
            chosen = ApiToken.objects.filter(user=user, pk=options["id"]).first()
            if chosen is None:
                raise CommandError(f"{name} has no token {options['id']}")
            if token_revoke(token=chosen, user=user):
                self.stdout.write(f"revoked token {chosen.pk} ({chosen.name!r}) of {name}")
            else:
                self.stdout.write(f"token {chosen.pk} ({chosen.name!r}) of {name} was already revoked")
