"""Start the test provider: `python -m tests.oidc_idp.serve IDP_DIR`. Migrates its SQLite,
registers the client of directory.json, prints `READY <port>` and serves on 127.0.0.1."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    idp_dir = Path(sys.argv[1])
    os.environ["IDP_DIR"] = str(idp_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_idp.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from oauth2_provider.models import get_application_model

    call_command("migrate", verbosity=0, interactive=False)
    client = json.loads((idp_dir / "directory.json").read_text())["client"]
    application = get_application_model()
    application.objects.filter(client_id=client["client_id"]).delete()
    application.objects.create(
        name="evalsite", client_id=client["client_id"], client_secret=client["client_secret"],
        client_type=application.CLIENT_CONFIDENTIAL, authorization_grant_type=application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=client["redirect_uri"], algorithm=application.RS256_ALGORITHM, skip_authorization=True)
    server = make_server("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0, get_wsgi_application(),
                         server_class=ThreadingServer, handler_class=QuietHandler)
    print(f"READY {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
