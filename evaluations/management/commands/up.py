"""python manage.py up: evalsite on one machine, in one command.

Migrates, makes sure there is a project and an admin to log in with, collects the static
files (content-hashed and compressed; skipped when they have not changed), then runs the web
server (gunicorn) and django-q2 as child processes until interrupted. With no environment
set this is the embedded default: SQLite in the data directory and the ORM broker, so
nothing else has to be installed or running.

`up --team` starts the team-server shape instead, against the PostgreSQL of DATABASE_URL
and the Redis of REDIS_URL (or `--broker orm`: the queue in PostgreSQL): migrations,
then gunicorn and `--clusters` separate `qcluster` processes, as a team runs them on several
machines. It supervises them: a cluster that dies is restarted, and a watchdog resumes
runs whose work stopped (see `evaluations.runs.services.resume_stalled_runs`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluations.evalsets.services import project_get_or_create_default
from evaluations.models import Membership

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"
STATIC_STORAGE = "evalsite.staticfiles.StaticFilesStorage"
STATIC_STAMP = ".evalsite-collected"  # in STATIC_ROOT: the fingerprint of the sources last collected


@dataclass
class Child:
    """A supervised child process. Each runs in its own session, so that stopping or
    replacing it also ends whatever it forked (a qcluster's sentinel and workers)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    nice: int = 0
    proc: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)

    def start(self) -> None:
        nice = self.nice
        self.proc = subprocess.Popen(self.argv, cwd=settings.BASE_DIR, env=self.env, start_new_session=True,
                                     preexec_fn=(lambda: lower_priority(nice)) if nice else None)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def kill_group(self) -> None:
        """SIGKILL what is left of the child's process group (a qcluster killed outright
        leaves its sentinel and workers behind, still taking tasks)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)


def lower_priority(nice: int) -> None:
    """In a child, after its new session and before it runs its program: a CPU priority
    `nice` steps below the processes that keep theirs. Both of Linux's knobs: the process's
    nice value, inherited by whatever it forks (gunicorn's workers and their threads), and
    its session's autogroup's, which is what the scheduler weighs between sessions where
    autogroups are on (most desktop and container kernels). There a plain nice only ranks a
    session's own threads against each other, and every session (each child of `up`,
    PostgreSQL) gets an equal share of the CPU: busy web workers take as much as the queue's.
    Without autogroups (a kernel without them, or turned off) the file is absent and the
    nice value does the job alone."""
    os.nice(nice)
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as autogroup:
        autogroup.write(str(nice))


def served_at(host: str, port: int) -> str:
    """The address the web server answers on, as a link: a wildcard host (every interface) is
    named by this machine's host name, an IPv6 address goes in brackets."""
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 - compared, not bound
        host = socket.gethostname()
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def static_fingerprint(storage: str) -> str:
    """A hash of what collectstatic would collect (each finder's files: path, size, time)
    and the storage it would collect them with."""
    import hashlib

    from django.contrib.staticfiles import finders

    digest = hashlib.sha256(storage.encode())
    for finder in finders.get_finders():
        for path, source in sorted(finder.list(["CVS", ".*", "*~"]), key=lambda found: found[0]):
            info = os.stat(source.path(path))
            prefix = getattr(source, "prefix", "") or ""
            digest.update(f"\0{prefix}/{path}\0{info.st_size}\0{info.st_mtime_ns}".encode())
    return digest.hexdigest()


class Command(BaseCommand):
    help = "Start evalsite: migrations, web server and task-queue cluster together."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("EVALSITE_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("EVALSITE_PORT", "8000")))
        parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes")
        parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
        parser.add_argument("--web-nice", type=int, default=None,
                            help="how many steps (0-19) below the queue's the web server's CPU priority is "
                                 "(default EVALSITE_WEB_NICE, 5): when both want the CPU, runs are evaluated "
                                 "first; 0 gives them equal weight")
        parser.add_argument("--no-cluster", action="store_true", help="run the web server only")
        parser.add_argument("--demo", action="store_true", help="load the demo eval set into the default project")
        team = parser.add_argument_group("team server")
        team.add_argument("--team", action="store_true",
                          help="the team-server shape: PostgreSQL (DATABASE_URL), Redis (REDIS_URL) or "
                               "--broker orm, gunicorn and --clusters qcluster processes, supervised")
        team.add_argument("--clusters", type=int, default=2, help="qcluster processes (with --team)")
        team.add_argument("--cluster-workers", type=int, default=None,
                          help="workers per qcluster (default: EVALSITE_WORKERS, 2)")
        team.add_argument("--broker", choices=["redis", "orm"], default=None,
                          help="the task queue (with --team): redis (REDIS_URL, the default) or orm (PostgreSQL)")
        team.add_argument("--watchdog-seconds", type=float, default=None,
                          help="how often to look for lost and stalled work and hung clusters (default: "
                               "EVALSITE_WATCHDOG_SECONDS, 5, or a third of EVALSITE_LEASE_SECONDS if less; "
                               "0: only the clusters' own schedule)")
        team.add_argument("--stop-timeout", type=float, default=30.0,
                          help="seconds to let the children stop gracefully before killing them")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["web_nice"] is None:
            given = os.environ.get("EVALSITE_WEB_NICE", "5")
            try:
                options["web_nice"] = int(given)
            except ValueError:
                raise CommandError("--web-nice (EVALSITE_WEB_NICE) must be a whole number 0-19, "
                                   f"not {given!r}") from None
        if not 0 <= options["web_nice"] <= 19:
            raise CommandError(f"--web-nice (EVALSITE_WEB_NICE) must be 0-19, not {options['web_nice']}")
        if options["team"]:
            self._check_team_services(options)
        elif options["broker"]:
            raise CommandError("--broker goes with --team")
        call_command("migrate", interactive=False, verbosity=0)
        project = project_get_or_create_default()
        login_hint = self._ensure_admin(project)
        if options["demo"]:
            self._load_demo(project)
        env = {**os.environ, "SECRET_KEY": settings.SECRET_KEY}  # django-q2 signs tasks with it
        self._collect_static(env)
        if options["cluster_workers"] is not None:
            env["EVALSITE_WORKERS"] = str(options["cluster_workers"])

        clusters = 0 if options["no_cluster"] else (options["clusters"] if options["team"] else 1)
        if clusters and "EVALSITE_RUN_WINDOW" not in os.environ:
            # One run may keep every worker of every cluster busy (evaluations/runs/queue.py).
            window = 2 * clusters * int(str(env.get("EVALSITE_WORKERS") or settings.Q_CLUSTER["workers"]))
            env["EVALSITE_RUN_WINDOW"] = str(window)
            settings.EVALSITE_RUN_WINDOW = window  # this process's watchdog queues batches too
        url = f"http://{options['host']}:{options['port']}/"
        links = os.environ.get("EVALSITE_BASE_URL", "")
        if not links:  # notifications link to where this server answers, unless told otherwise
            links = served_at(options["host"], options["port"])
            env["EVALSITE_BASE_URL"] = settings.EVALSITE_BASE_URL = links
        web = Child("web", self._web_argv(options), env, nice=options["web_nice"])
        children = [web]
        for n in range(clusters):
            children.append(Child(f"qcluster-{n + 1}", [sys.executable, "manage.py", "qcluster"], env))

        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        for child in children:
            child.start()
        try:
            if not self._wait_healthy(url, web):
                raise CommandError("the web server did not come up; see its output above")
            self._print_banner(url, login_hint, options, clusters, links)
            if options["team"]:
                self._supervise(children, options, lambda: stopping)
            else:
                while not stopping:
                    for child in children:
                        if child.exited():
                            raise CommandError(f"{child.name} exited with code {child.proc.returncode}; stopping")  # type: ignore[union-attr]
                    time.sleep(0.5)
        finally:
            self._stop(children, options["stop_timeout"])

    def _collect_static(self, env: dict[str, str]) -> None:
        """The assets, collected into STATIC_ROOT with content-hashed names and gzip/brotli
        copies (evalsite.staticfiles), for the web server started with that storage: in the
        embedded default too, so a phone gets them compressed and caches them for a year.
        Skipped when the sources (every finder's files, their sizes and times) and the
        storage are those of the last collection: a restart costs a directory listing."""
        env["EVALSITE_STATICFILES_STORAGE"] = os.environ.get("EVALSITE_STATICFILES_STORAGE", STATIC_STORAGE)
        stamp = Path(settings.STATIC_ROOT) / STATIC_STAMP
        fingerprint = static_fingerprint(env["EVALSITE_STATICFILES_STORAGE"])
        with contextlib.suppress(OSError):
            if stamp.read_text() == fingerprint and (Path(settings.STATIC_ROOT) / "staticfiles.json").exists():
                return
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
                       cwd=settings.BASE_DIR, env=env, check=True)
        stamp.write_text(fingerprint)

    # --- Team server ------------------------------------------------------------------------

    def _check_team_services(self, options: dict[str, Any]) -> None:
        """PostgreSQL and the broker must answer before anything starts, with an error that
        says which one and how to fix it."""
        database = settings.DATABASES["default"]
        if database["ENGINE"] != "django.db.backends.postgresql":
            raise CommandError("--team needs PostgreSQL: set DATABASE_URL=postgres://USER@HOST:5432/NAME "
                               f"(now: {database['ENGINE'].rsplit('.', 1)[-1]})")
        broker = options["broker"] or ("redis" if settings.REDIS_URL else None)
        if broker is None:
            raise CommandError("--team needs a task queue: set REDIS_URL=redis://HOST:6379/0, "
                               "or pass --broker orm to queue tasks in PostgreSQL")
        if broker == "redis" and not settings.REDIS_URL:
            raise CommandError("--broker redis needs REDIS_URL=redis://HOST:6379/0")

        import psycopg

        where = f"{database.get('HOST') or 'localhost'}:{database.get('PORT') or 5432}"
        try:
            psycopg.connect(dbname=database["NAME"], user=database.get("USER") or None,
                            password=database.get("PASSWORD") or None, host=database.get("HOST") or None,
                            port=database.get("PORT") or None, connect_timeout=5).close()
        except psycopg.Error as exc:
            detail = " ".join(str(exc).split())
            if "does not exist" in detail:
                detail += f" (create it: createdb -h {database.get('HOST') or 'localhost'} " \
                          f"-U {database.get('USER') or 'postgres'} {database['NAME']})"
            raise CommandError(f"cannot reach PostgreSQL at {where}, database {database['NAME']!r} "
                               f"(DATABASE_URL): {detail}") from None

        if broker == "orm" and os.environ.get("REDIS_URL"):
            # The broker is read from the environment when Django starts: start again without
            # REDIS_URL, so this process (the watchdog, --demo) queues where the clusters read.
            if sys.argv[1:2] != ["up"]:  # called from code, not the command line
                raise CommandError("--broker orm: unset REDIS_URL first")
            sys.stdout.flush()
            sys.stderr.flush()
            env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
            os.execve(sys.executable, [sys.executable, *sys.argv], env)  # noqa: S606 - same program, same argv
        if broker == "redis":
            import redis

            client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3, socket_timeout=3)
            try:
                client.ping()
            except redis.RedisError as exc:
                pool = client.connection_pool.connection_kwargs
                raise CommandError(f"cannot reach Redis at {pool.get('host', '?')}:{pool.get('port', '?')} "
                                   f"(REDIS_URL): {exc}; start it, or pass --broker orm to queue tasks in "
                                   "PostgreSQL") from None
            finally:
                client.close()

    def _supervise(self, children: list[Child], options: dict[str, Any], stopping: Any) -> None:
        """Restart a child that exits (backing off when it keeps dying: a database that is
        down makes every start fail), and, every watchdog tick: send the batches the broker
        refused or lost, resume stalled runs, score the traces whose monitor task was lost,
        and restart a cluster that hangs (evaluations/management/clusters.py)."""
        from django.db import close_old_connections, connection

        from evaluations.management.clusters import HangWatch, hung_clusters_report
        from evaluations.runs.services import lost_tasks_requeue

        lease = settings.EVALSITE_LEASE_SECONDS
        every = options["watchdog_seconds"]
        if every is None:
            every = min(float(settings.EVALSITE_WATCHDOG_SECONDS), max(1.0, lease / 3))
        next_watch = time.monotonic() + every
        due: dict[str, float] = {}
        hangs = HangWatch()
        restarted = False  # a cluster started again: the tasks its predecessor had fetched are gone
        while not stopping():
            now = time.monotonic()
            for child in children:
                if not child.exited():
                    continue
                if child.name not in due:
                    child.kill_group()
                    child.restarts = [t for t in child.restarts if now - t < 60]
                    delay = min(30.0, 0.5 * 2 ** len(child.restarts))
                    self.stderr.write(f"up: {child.name} exited with code {child.proc.returncode}; "  # type: ignore[union-attr]
                                      f"restarting it in {delay:g}s")
                    due[child.name] = now + delay
                elif now >= due[child.name]:
                    del due[child.name]
                    child.restarts.append(now)
                    child.start()
                    restarted = restarted or child.name.startswith("qcluster")
                    self.stdout.write(f"up: {child.name} restarted (pid {child.pid})")
                    self.stdout.flush()
            if every and now >= next_watch:
                next_watch = now + every
                try:
                    close_old_connections()
                    if restarted:
                        restarted = False
                        self._say_resumed(lost_tasks_requeue())
                    self._watch(children, hangs, hung_clusters_report)
                except Exception as exc:  # the database or the broker is down: the next round tries again
                    self.stderr.write(f"up: the watchdog failed: {type(exc).__name__}: {exc}")
                    connection.close()
            time.sleep(0.25)

    def _say_resumed(self, resumed: list[int]) -> None:
        if resumed:
            self.stdout.write(f"up: resumed stalled runs {', '.join(map(str, resumed))}")
            self.stdout.flush()

    def _watch(self, children: list[Child], hangs: Any, report: Any) -> None:
        from evaluations.management.clusters import marks_end
        from evaluations.monitors.pending import pending_sweep
        from evaluations.runs.services import lost_work_resume, resume_stalled_runs

        self._say_resumed(sorted(set(lost_work_resume()) | set(resume_stalled_runs())))
        swept = pending_sweep(budget_seconds=10.0)
        if swept.traces:
            self.stdout.write(f"up: scored {swept.traces} received traces whose monitor task was lost")
            self.stdout.flush()
        clusters = {child.name: child for child in children
                    if child.name.startswith("qcluster") and child.proc is not None and not child.exited()}
        for name in hangs.look({name: child.pid for name, child in clusters.items()}):
            child = clusters[name]
            self.stderr.write(f"up: {name} is hung: {report([child.pid])} while tasks waited; restarting it")
            self.stderr.flush()
            child.kill_group()  # the loop above starts it again and requeues what it held
            marks_end(child.pid)

    # --- Shared -----------------------------------------------------------------------------

    def _print_banner(self, url: str, login_hint: str, options: dict[str, Any], clusters: int, links: str) -> None:
        database = settings.DATABASES["default"]
        workers = settings.Q_CLUSTER["workers"] if options["cluster_workers"] is None else options["cluster_workers"]
        if not clusters:
            queue = "no cluster"
        elif options["team"]:
            queue = (f"{clusters} qcluster process{'es' if clusters != 1 else ''} x "
                     f"{workers} worker{'s' if workers != 1 else ''}")
        else:
            queue = f"{workers} workers"
        priority = (f"CPU priority {options['web_nice']} below the queue's (--web-nice)" if options["web_nice"]
                    else "the queue's CPU priority")
        self.stdout.write(
            f"\nevalsite is running at {url}\n"
            f"  {login_hint}\n"
            f"  database: {database['ENGINE'].rsplit('.', 1)[-1]} {database.get('NAME') or ''}\n"
            f"  task queue: {'redis' if settings.REDIS_URL else 'ORM broker'}, {queue}\n"
            f"  web server: gunicorn, {options['web_workers']} x {options['threads']} threads, {priority}\n"
            f"  links in notifications: {links}"
            + ("" if os.environ.get("EVALSITE_BASE_URL") else
               " (EVALSITE_BASE_URL is not set: set it to the address people open, if that is another one)")
            + "\n"
            "Press Ctrl+C to stop.\n"
        )
        self.stdout.flush()

    def _stop(self, children: list[Child], timeout: float) -> None:
        """SIGTERM: gunicorn finishes its requests, a qcluster its tasks in hand; what has not
        stopped in `timeout` seconds is killed, with everything it forked."""
        for child in children:
            if child.proc is not None and child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"up: {child.name} did not stop in {timeout:g}s; killing it")
            child.kill_group()
            child.proc.wait()

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
        from evaluations.audit import record_run, record_uploads
        from evaluations.evalsets.services import evalset_import
        from evaluations.interop import files_from_paths
        from evaluations.models import AuditEvent, Run
        from evaluations.runs import services as runs

        files = files_from_paths([DEMO_DIR / "travel_agent.evalset.json"])
        [outcome] = evalset_import(project=project, files=files)
        record_uploads(project=project, actor=None, outcomes=[outcome], via="manage.py up --demo")
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
            record_run(run=run, actor=None, verb=AuditEvent.Verb.RUN_STARTED, via="manage.py up --demo")
            self.stdout.write(f"demo: queued run {run.pk} ({name})")

    def _web_argv(self, options: dict[str, Any]) -> list[str]:
        return [
            sys.executable, "-m", "gunicorn", "evalsite.wsgi:application",
            "--bind", f"{options['host']}:{options['port']}",
            "--workers", str(options["web_workers"]),
            "--threads", str(options["threads"]),
            "--timeout", "120",
            "--graceful-timeout", str(int(options["stop_timeout"])),
            "--access-logfile", "-",
            # gunicorn 25+ opens a control socket under ~/.gunicorn/ by default; evalsite does not
            # use it, and `up` writes nothing outside the project's folder, its data dir and the
            # temp dir.
            "--no-control-socket",
        ]

    def _wait_healthy(self, url: str, web: Child, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if web.exited():
                return False
            try:
                with urllib.request.urlopen(url + "healthz", timeout=2) as response:  # noqa: S310 - our own URL
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        return False
