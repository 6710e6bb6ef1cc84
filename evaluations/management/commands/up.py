"""python manage.py up: evalsite on one machine, in one command.

Migrates, makes sure there is a project and an admin to log in with, then runs the web
server (gunicorn) and a django-q2 cluster as child processes until interrupted. With no
environment set this is the embedded default: SQLite in the data directory and the ORM
broker, so nothing else has to be installed or running.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluations.models import Membership
from evaluations.services import project_get_or_create_default

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"


class Command(BaseCommand):
    help = "Start evalsite: migrations, web server and task-queue cluster together."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("EVALSITE_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("EVALSITE_PORT", "8000")))
        parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes")
        parser.add_argument("--no-cluster", action="store_true", help="run the web server only")
        parser.add_argument("--demo", action="store_true", help="load the demo eval set into the default project")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        project = project_get_or_create_default()
        login_hint = self._ensure_admin(project)
        if options["demo"]:
            self._load_demo(project)

        url = f"http://{options['host']}:{options['port']}/"
        children = [self._start_web(options)]
        if not options["no_cluster"]:
            children.append(subprocess.Popen([sys.executable, str(settings.BASE_DIR / "manage.py"), "qcluster"]))

        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            if not self._wait_healthy(url, children[0]):
                raise CommandError("the web server did not come up; see its output above")
            database = settings.DATABASES["default"]
            self.stdout.write(
                f"\nevalsite is running at {url}\n"
                f"  {login_hint}\n"
                f"  database: {database['ENGINE'].rsplit('.', 1)[-1]} {database.get('NAME') or ''}\n"
                f"  task queue: {'redis' if settings.REDIS_URL else 'ORM broker'}, "
                f"{'no cluster' if options['no_cluster'] else str(settings.Q_CLUSTER['workers']) + ' workers'}\n"
                "Press Ctrl+C to stop.\n"
            )
            self.stdout.flush()
            while not stopping:
                for child in children:
                    if child.poll() is not None:
                        raise CommandError(f"a child process exited with code {child.returncode}; stopping")
                time.sleep(0.5)
        finally:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for child in children:
                try:
                    child.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    child.kill()

    def _ensure_admin(self, project: Any) -> str:
        User = get_user_model()
        admin = User.objects.filter(is_superuser=True).order_by("pk").first()
        if admin is not None:
            Membership.objects.get_or_create(project=project, user=admin, defaults={"role": Membership.Role.ADMIN})
            return f"log in as {admin.get_username()!r} (password as set before)"
        username = os.environ.get("EVALSITE_ADMIN_USERNAME", "admin")
        password = os.environ.get("EVALSITE_ADMIN_PASSWORD")
        generated = password is None
        if generated:
            password = secrets.token_urlsafe(12)
        admin = User.objects.create_superuser(username, os.environ.get("EVALSITE_ADMIN_EMAIL", ""), password)
        Membership.objects.create(project=project, user=admin, role=Membership.Role.ADMIN)
        if generated:
            return (f"log in as {username!r} with password {password!r} "
                    "(generated now and shown only once: change it after logging in)")
        return f"log in as {username!r} with the password from EVALSITE_ADMIN_PASSWORD"

    def _load_demo(self, project: Any) -> None:
        """The demo eval set, and two runs of the demo agent on it for the queue to execute:
        a baseline and a candidate with injected faults, so there is a real comparison."""
        from evaluations import runs
        from evaluations.formats import files_from_paths
        from evaluations.models import Run
        from evaluations.services import evalset_import

        files = files_from_paths([DEMO_DIR / "travel_agent.evalset.json"])
        [outcome] = evalset_import(project=project, files=files)
        self.stdout.write(f"demo: {outcome.describe()}")
        if Run.objects.filter(evalset_version=outcome.version).exists():
            return
        agent = "evaluations.demo.agent:respond"
        for name, faults, branch in (
            ("demo baseline", {}, "main"),
            ("demo candidate", {"wrong_argument": True, "missing_call": True, "slow_answer_seconds": 0.3,
                                "rate": 0.4}, "feature/new-prompt"),
        ):
            run = runs.run_create(project=project, version=outcome.version, target_kind=Run.TargetKind.PYTHON,
                                  target={"callable": agent, "metadata": {"faults": faults}}, iterations=2,
                                  name=name, labels={"model": "demo-agent", "branch": branch, "tags": ["demo"]})
            self.stdout.write(f"demo: queued run {run.pk} ({name})")

    def _start_web(self, options: dict[str, Any]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable, "-m", "gunicorn", "evalsite.wsgi:application",
                "--bind", f"{options['host']}:{options['port']}",
                "--workers", str(options["web_workers"]),
                "--threads", "4",
                "--timeout", "120",
                "--access-logfile", "-",
            ],
            cwd=settings.BASE_DIR,
        )

    def _wait_healthy(self, url: str, web: subprocess.Popen[bytes], timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if web.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(url + "healthz", timeout=2) as response:  # noqa: S310 - our own URL
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        return False
