"""Notification pages: the project's rules and channels (everyone in the project reads them;
admins change them, send a test and resume a paused channel), each channel's delivery log,
and each person's own notifications (the navigation shows how many are unread).

Views check access and call one service (evaluations.notify.services / .delivery)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaluations.converters import parse_id
from evaluations.models import (
    EvalSet,
    Membership,
    Monitor,
    Notification,
    NotifyAttempt,
    NotifyChannel,
    NotifyDelivery,
    NotifyRule,
    Project,
)
from evaluations.notify import delivery, events, payloads, redact, selectors, services
from evaluations.web.views.common import current_project, enter_project

LOG_PAGE = 50
INBOX_PAGE = 30


def _project(request: HttpRequest, slug: str, *, admin: bool = False) -> tuple[Project, bool]:
    """The project (404 unless the user is in it) and whether they are its admin; 403 for a
    change by anyone else."""
    project = get_object_or_404(Project.objects.visible_to(request.user), slug=slug)
    is_admin = project.role_of(request.user) == Membership.Role.ADMIN
    if admin and not is_admin:
        raise PermissionDenied("only project admins change notifications")
    enter_project(request, project)
    return project, is_admin


class ChannelForm(forms.Form):
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=NotifyChannel.Kind.choices, label="Kind")
    url = forms.CharField(max_length=1000, required=False, label="URL",
                          help_text="webhook and Slack: where to POST (checked against the egress policy)")
    emails = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, label="E-mail addresses",
                             help_text="e-mail: one a line, for project-wide rules (assignments and mentions go "
                                       "to the person)")
    enabled = forms.BooleanField(required=False, initial=True)


class RuleForm(forms.Form):
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=NotifyRule.Kind.choices, label="When")
    enabled = forms.BooleanField(required=False, initial=True)
    channels = forms.ModelMultipleChoiceField(queryset=NotifyChannel.objects.none(), required=False,
                                              widget=forms.CheckboxSelectMultiple)
    condition = forms.ChoiceField(choices=NotifyRule.RunCondition.choices, required=False,
                                  label="Run finished", initial=NotifyRule.RunCondition.REGRESSIONS)
    pass_rate_below = forms.CharField(required=False, label="Pass rate below (0 to 1)")
    evalset = forms.ModelChoiceField(queryset=EvalSet.objects.none(), required=False, label="Eval set",
                                     empty_label="any eval set")
    branch = forms.CharField(required=False, max_length=255, help_text="empty: any branch")
    model = forms.CharField(required=False, max_length=200, help_text="empty: any model")
    monitor_id = forms.ChoiceField(required=False, label="Monitor")
    criterion = forms.CharField(required=False, max_length=100, label="Monitor criterion",
                                help_text="one of the monitor's criteria, by name")
    threshold = forms.CharField(required=False, label="Monitor pass rate below (0 to 1)")
    window_minutes = forms.CharField(required=False, label="Window (minutes)", initial=60)
    min_count = forms.CharField(required=False, label="Minimum scores in the window", initial=20)
    period = forms.ChoiceField(choices=NotifyRule.Period.choices, required=False, label="Digest period")
    cooldown_minutes = forms.CharField(required=False, label="Cooldown (minutes)", initial=0,
                                       help_text="what fires meanwhile is sent together when it ends")

    def __init__(self, project: Project, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["channels"].queryset = NotifyChannel.objects.filter(project=project)  # type: ignore[attr-defined]
        self.fields["evalset"].queryset = EvalSet.objects.filter(project=project)  # type: ignore[attr-defined]
        monitors = Monitor.objects.filter(project=project).order_by("name").values_list("pk", "name", "criteria")
        self.fields["monitor_id"].choices = [("", "—")] + [  # type: ignore[attr-defined]
            (str(pk), f"{name} ({', '.join(sorted(criteria))})") for pk, name, criteria in monitors]


def _apply_errors(form: forms.Form, exc: ValidationError) -> None:
    for field, errors in getattr(exc, "message_dict", {"__all__": exc.messages}).items():
        form.add_error(field if field in form.fields else None, errors)


def _count(**lookups: Any) -> Any:
    rows = (NotifyDelivery.objects.filter(channel=OuterRef("pk"), **lookups).order_by().values("channel")
            .annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


@login_required
@require_GET
def notify_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's rules and channels, each channel with its state (paused, failures in a
    row, last delivery): a few aggregate queries whatever the log's length."""
    project, is_admin = _project(request, slug)
    rules = list(NotifyRule.objects.filter(project=project).prefetch_related("channels")
                 .select_related("evalset", "owner"))
    names = dict(Monitor.objects.filter(project=project, pk__in={r.monitor_id for r in rules if r.monitor_id})
                 .values_list("pk", "name"))
    for r in rules:
        r.monitor_name = names.get(r.monitor_id or 0, "")  # type: ignore[attr-defined]
        r.next_digest = events.digest_due(r) if r.kind == NotifyRule.Kind.DIGEST else None  # type: ignore[attr-defined]
    chans = list(NotifyChannel.objects.filter(project=project).annotate(
        last_at=Subquery(NotifyAttempt.objects.filter(channel=OuterRef("pk")).order_by("-at").values("at")[:1]),
        sent=_count(status="sent"), waiting=_count(status__in=["pending", "sending"]), failed=_count(status="failed")))
    for c in chans:
        c.pause_reason = redact.for_viewer(c.pause_reason, c, admin=is_admin)
    return render(request, "evaluations/notify/settings.html",
                  {"project": project, "is_admin": is_admin, "rules": rules, "channels": chans})


@login_required
@require_http_methods(["GET", "POST"])
def notify_rule_edit(request: HttpRequest, slug: str, pk: int | None = None) -> HttpResponse:
    project, _ = _project(request, slug, admin=True)
    rule = get_object_or_404(NotifyRule, project=project, pk=pk) if pk is not None else None
    if request.method == "POST" and request.POST.get("action") == "delete" and rule is not None:
        services.rule_delete(rule=rule, actor=request.user)
        messages.success(request, f"Removed the rule {rule.name}.")
        return HttpResponseRedirect(reverse("notify_settings", args=[project.slug]))
    initial: dict[str, Any] = {}
    if rule is not None:
        initial = {f: getattr(rule, f) for f in services.RULE_FIELDS if f != "evalset"}
        initial.update(evalset=rule.evalset_id, channels=list(rule.channels.values_list("pk", flat=True)))
    form = RuleForm(project, request.POST or None, initial=initial)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            values = dict(form.cleaned_data)
            chosen = [c.pk for c in values.pop("channels")]
            values["evalset"] = values["evalset"].pk if values["evalset"] else None
            try:
                saved = services.rule_save(project=project, values=values, actor=request.user, channels=chosen,
                                           rule=rule)
            except ValidationError as exc:
                _apply_errors(form, exc)
            else:
                messages.success(request, f"Saved the rule {saved.name}.")
                return HttpResponseRedirect(reverse("notify_settings", args=[project.slug]))
        status = 400
    return render(request, "evaluations/notify/rule_form.html",
                  {"project": project, "form": form, "rule": rule}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def notify_channel_edit(request: HttpRequest, slug: str, pk: int | None = None) -> HttpResponse:
    project, _ = _project(request, slug, admin=True)
    channel = get_object_or_404(NotifyChannel, project=project, pk=pk) if pk is not None else None
    if request.method == "POST" and request.POST.get("action") == "delete" and channel is not None:
        services.channel_delete(channel=channel, actor=request.user)
        messages.success(request, f"Removed the channel {channel.name}.")
        return HttpResponseRedirect(reverse("notify_settings", args=[project.slug]))
    initial = {f: getattr(channel, f) for f in services.CHANNEL_FIELDS} if channel else {}
    form = ChannelForm(request.POST or None, initial=initial)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                saved = services.channel_save(project=project, values=dict(form.cleaned_data), actor=request.user,
                                              channel=channel)
            except ValidationError as exc:
                _apply_errors(form, exc)
            else:
                messages.success(request, f"Saved the channel {saved.name}.")
                return HttpResponseRedirect(reverse("notify_settings", args=[project.slug]))
        status = 400
    return render(request, "evaluations/notify/channel_form.html",
                  {"project": project, "form": form, "channel": channel}, status=status)


@login_required
@require_GET
def notify_channel_log(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """The channel's delivery log, newest first, a page at a time."""
    project, is_admin = _project(request, slug)
    channel = get_object_or_404(NotifyChannel, project=project, pk=pk)
    attempts = (channel.log.select_related("delivery__message").order_by("-at", "-pk")
                .defer("delivery__message__payload"))
    page = Paginator(attempts, LOG_PAGE).get_page(request.GET.get("page"))
    for attempt in page.object_list:  # answers and errors can echo the URL or a token
        attempt.excerpt = redact.for_viewer(attempt.excerpt, channel, admin=is_admin)
    channel.pause_reason = redact.for_viewer(channel.pause_reason, channel, admin=is_admin)
    return render(request, "evaluations/notify/channel_log.html",
                  {"project": project, "channel": channel, "page": page, "is_admin": is_admin,
                   "signature_help": channel.kind == NotifyChannel.Kind.WEBHOOK and is_admin})


@login_required
@require_POST
def notify_channel_test(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = _project(request, slug, admin=True)
    channel = get_object_or_404(NotifyChannel, project=project, pk=pk)
    delivery.send_test(channel)
    note = " It waits until the channel is resumed." if channel.paused_at else ""
    messages.success(request, f"A test message to {channel.name} is queued: its attempt shows below.{note}")
    return HttpResponseRedirect(reverse("notify_channel_log", args=[project.slug, channel.pk]))


@login_required
@require_POST
def notify_channel_resume(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = _project(request, slug, admin=True)
    channel = get_object_or_404(NotifyChannel, project=project, pk=pk)
    waiting = delivery.resume(channel)
    services.channel_resumed(channel=channel, actor=request.user)
    messages.success(request, f"Resumed {channel.name}: {waiting} waiting deliver{'y' if waiting == 1 else 'ies'} "
                              "queued.")
    return HttpResponseRedirect(reverse("notify_channel_log", args=[project.slug, channel.pk]))


@login_required
@require_GET
def notification_list(request: HttpRequest) -> HttpResponse:
    """Your notifications, newest first, across your projects (a page at a time)."""
    current_project(request)
    rows = (Notification.objects.filter(user_id=int(request.user.pk or 0),
                                        project__in=Project.objects.visible_to(request.user))
            .select_related("message", "project").order_by("-created_at", "-pk"))
    page = Paginator(rows, INBOX_PAGE).get_page(request.GET.get("page"))
    items = [{"note": n, "lines": [(text.strip(), link, text.startswith(" "))
                                   for text, link in payloads.lines_of(n.message.payload)]}
             for n in page.object_list]
    unread = Notification.objects.filter(user_id=int(request.user.pk or 0), read_at=None).count()
    mine = list(Project.objects.filter(memberships__user_id=int(request.user.pk or 0)).order_by("name", "pk"))
    return render(request, "evaluations/notify/inbox.html", {
        "page": page, "items": items, "unread": unread,
        "personal": selectors.personal_rules(request.user, mine)})


@login_required
@require_POST
def notification_personal(request: HttpRequest, slug: str) -> HttpResponse:
    """"Notify me of my assignments and mentions" in a project (`action=on`), or stop your
    own rules there (`action=off`)."""
    project = get_object_or_404(Project.objects.filter(memberships__user_id=int(request.user.pk or 0)), slug=slug)
    if request.POST.get("action") == "off":
        services.personal_rules_disable(project=project, user=request.user)
        messages.success(request, f"Your own notification rules in {project.name} are off.")
    else:
        services.personal_rules_enable(project=project, user=request.user)
        messages.success(request, f"Cases assigned to you and your @mentions in {project.name} now come to you.")
    return HttpResponseRedirect(reverse("notification_list"))


@login_required
@require_GET
def notification_count(request: HttpRequest) -> HttpResponse:
    """The navigation's unread count, fetched by the page after it loads."""
    count = Notification.objects.filter(user_id=int(request.user.pk or 0), read_at=None).count()
    return render(request, "evaluations/notify/_nav_count.html", {"count": count})


@login_required
@require_POST
def notification_read(request: HttpRequest) -> HttpResponse:
    """Mark your notifications read: one (`notification`), or all."""
    mine = Notification.objects.filter(user_id=int(request.user.pk or 0), read_at=None)
    chosen = request.POST.get("notification", "")
    if chosen:
        mine = mine.filter(pk=parse_id(chosen) or 0)
    mine.update(read_at=timezone.now())
    return HttpResponseRedirect(reverse("notification_list"))
