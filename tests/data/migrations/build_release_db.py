"""Builds `release-b23344d.sqlite3.gz`: a database written by evalsite as released at commit
b23344d (the last landing before the migrations were squashed), for
tests/test_migration_squash.py. Run from a checkout of that commit:

    git worktree add /tmp/release b23344d && cd /tmp/release
    EVALSITE_DATA_DIR=/tmp/release-data python manage.py migrate -v 0
    EVALSITE_DATA_DIR=/tmp/release-data python path/to/build_release_db.py
    sqlite3 /tmp/release-data/evalsite.sqlite3 'PRAGMA wal_checkpoint(TRUNCATE); VACUUM'
    gzip -9 -c /tmp/release-data/evalsite.sqlite3 > release-b23344d.sqlite3.gz

What it holds: the API seed's world (a project, an admin with a token, the demo eval set,
a baseline and a regressed candidate run with their comparison, a triage with a comment, a
saved config), a monitor, two received traces (the monitor's scoring task left queued), a
webhook channel with a rule, and a second eval set version.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

import django  # noqa: E402

django.setup()

from django.test import Client  # noqa: E402

from evaluations.models import Membership, Project  # noqa: E402
from evaluations.monitors.spec import MonitorSpec  # noqa: E402
from evaluations.monitors.services import monitor_create  # noqa: E402
from evaluations.models import NotifyChannel, NotifyRule  # noqa: E402
from tests.api_seed import seed  # noqa: E402
from tests.monitor_helpers import agent_trace, spec  # noqa: E402

token = seed()
project = Project.objects.get(slug="ci")
admin = Membership.objects.get(project=project).user
monitor_create(project=project, spec=MonitorSpec.model_validate(spec()), user=admin)
client = Client(SERVER_NAME="localhost")
for answer in ("Paris is sunny", "It rains"):
    response = client.post("/v1/traces", agent_trace(answer, session="s1", user="u1").SerializeToString(),
                           content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {token}",
                           HTTP_X_EVALSITE_PROJECT="ci")
    assert response.status_code == 200, response.content
# Rows, not the services: a channel's URL would be resolved by the egress check.
channel = NotifyChannel.objects.create(project=project, kind="webhook", name="hook", secret="s" * 64,
                                       url="https://hooks.example.com/evalsite", created_by=admin)
rule = NotifyRule.objects.create(project=project, name="regressions", kind="run_finished", condition="regressions",
                                 created_by=admin)
rule.channels.add(channel)
print("built", project.slug)
