"""Notification rules and channels through the API (the settings page's rules: everyone in
the project reads them, admins change them; another project is 404), each channel's delivery
log and "send a test", and your own notifications. The writes are the pages' services."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.generics import GenericAPIView, ListAPIView, ListCreateAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from evaluations.api.common import require_admin, responses, visible_projects
from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS, error_responses
from evaluations.api.serializers.fields import count_field, id_field
from evaluations.models import Notification, NotifyAttempt, NotifyChannel, NotifyRule, Project
from evaluations.notify import delivery, redact, services


class ChannelSerializer(serializers.ModelSerializer[NotifyChannel]):
    url = serializers.SerializerMethodField(help_text="webhook and Slack; admins only (it can hold a token)")
    paused = serializers.SerializerMethodField(help_text="paused after repeated failures until resumed")

    class Meta:
        model = NotifyChannel
        fields = ["id", "name", "kind", "url", "emails", "enabled", "paused", "paused_at", "pause_reason",
                  "failures_in_row", "created_at"]

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_paused(self, channel: NotifyChannel) -> bool:
        return channel.paused_at is not None

    def get_url(self, channel: NotifyChannel) -> str | None:
        return channel.url if self.context.get("admin") else None

    def to_representation(self, instance: NotifyChannel) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        data["pause_reason"] = redact.for_viewer(instance.pause_reason, instance, admin=bool(self.context.get("admin")))
        return data


class ChannelWriteSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=100, required=False)
    kind = serializers.ChoiceField(choices=NotifyChannel.Kind.choices, required=False)
    url = serializers.CharField(max_length=1000, required=False, allow_blank=True)
    emails = serializers.CharField(required=False, allow_blank=True, help_text="one address a line")
    enabled = serializers.BooleanField(required=False)


class ChannelCreatedSerializer(ChannelSerializer):
    secret = serializers.CharField(read_only=True, help_text="the webhook's HMAC key")

    class Meta(ChannelSerializer.Meta):
        fields = [*ChannelSerializer.Meta.fields, "secret"]


class RuleSerializer(serializers.ModelSerializer[NotifyRule]):
    channels = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    evalset = serializers.IntegerField(source="evalset_id", allow_null=True, read_only=True)

    class Meta:
        model = NotifyRule
        fields = ["id", "name", "kind", "enabled", "channels", "condition", "pass_rate_below", "evalset", "branch",
                  "model", "monitor_id", "criterion", "threshold", "window_minutes", "min_count", "period",
                  "cooldown_minutes", "last_fired_at", "created_at"]


class RuleWriteSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=100, required=False)
    kind = serializers.ChoiceField(choices=NotifyRule.Kind.choices, required=False)
    enabled = serializers.BooleanField(required=False)
    channels = serializers.ListField(child=id_field(), required=False)
    condition = serializers.ChoiceField(choices=NotifyRule.RunCondition.choices, required=False)
    pass_rate_below = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    evalset = id_field(required=False, allow_null=True)
    branch = serializers.CharField(required=False, allow_blank=True, max_length=255)
    model = serializers.CharField(required=False, allow_blank=True, max_length=200)
    monitor_id = id_field(required=False, allow_null=True)
    criterion = serializers.CharField(required=False, allow_blank=True, max_length=100)
    threshold = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    window_minutes = count_field(required=False, min_value=1)
    min_count = count_field(required=False)
    period = serializers.ChoiceField(choices=NotifyRule.Period.choices, required=False)
    cooldown_minutes = count_field(required=False)


class AttemptSerializer(serializers.ModelSerializer[NotifyAttempt]):
    delivery_id = serializers.UUIDField(source="delivery.idempotency_id", read_only=True)
    delivery_status = serializers.CharField(source="delivery.status", read_only=True)
    excerpt = serializers.SerializerMethodField(help_text="the answer's start or the error; secrets (tokens, the "
                                                          "URL's path) redacted except for the project's admins")

    class Meta:
        model = NotifyAttempt
        fields = ["id", "at", "ok", "status_code", "latency_ms", "excerpt", "delivery_id", "delivery_status"]

    def get_excerpt(self, attempt: NotifyAttempt) -> str:
        channel = self.context["channel"]
        return redact.for_viewer(attempt.excerpt, channel, admin=bool(self.context.get("admin")))


class TestQueuedSerializer(serializers.Serializer[Any]):
    delivery_id = serializers.UUIDField()
    status = serializers.CharField()


class NotificationSerializer(serializers.ModelSerializer[Notification]):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    subject = serializers.CharField(source="message.subject", read_only=True)
    event = serializers.CharField(source="message.event", read_only=True)
    payload = serializers.JSONField(source="message.payload", read_only=True)

    class Meta:
        model = Notification
        fields = ["id", "project", "event", "subject", "payload", "created_at", "read_at"]


def _project(request: Request, slug: str) -> Project:
    return get_object_or_404(visible_projects(request), slug=slug)


def _is_admin(request: Request, project: Project) -> bool:
    return project.role_of(request.user) == "admin"


def _saved(call: Any) -> Any:
    try:
        return call()
    except DjangoValidationError as exc:
        raise ValidationError(getattr(exc, "message_dict", {"non_field_errors": exc.messages})) from None


@extend_schema_view(
    get=extend_schema(summary="The project's notification channels",
                      responses=responses(ChannelSerializer(many=True), *READ_ERRORS)),
    post=extend_schema(summary="Add a channel (project admins); a webhook's secret is in the answer",
                       request=ChannelWriteSerializer,
                       responses=responses(ChannelCreatedSerializer, *WRITE_ERRORS, status=201)),
)
class ChannelList(ListCreateAPIView):
    serializer_class = ChannelSerializer

    def get_queryset(self) -> QuerySet[NotifyChannel]:
        return NotifyChannel.objects.filter(project=_project(self.request, self.kwargs["slug"])).order_by("name", "pk")

    def get_serializer_context(self) -> dict[str, Any]:
        project = _project(self.request, self.kwargs["slug"])
        return {**super().get_serializer_context(), "admin": _is_admin(self.request, project)}

    def create(self, request: Request, *args: Any, slug: str = "", **kwargs: Any) -> Response:
        project = _project(request, slug)
        require_admin(request, project, "change notifications")
        form = ChannelWriteSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        channel = _saved(lambda: services.channel_save(project=project, values=dict(form.validated_data),
                                                       actor=request.user))
        return Response(ChannelCreatedSerializer(channel, context={"admin": True}).data,
                        status=status.HTTP_201_CREATED)


@extend_schema_view(
    get=extend_schema(summary="One channel", responses=responses(ChannelSerializer, *READ_ERRORS)),
    patch=extend_schema(summary="Change a channel (project admins)", request=ChannelWriteSerializer,
                        responses=responses(ChannelSerializer, *WRITE_ERRORS)),
    delete=extend_schema(summary="Remove a channel (project admins)",
                         responses={204: None, **error_responses(*WRITE_ERRORS)}),
)
class ChannelDetail(GenericAPIView):
    serializer_class = ChannelSerializer

    def _channel(self, request: Request, slug: str, pk: int) -> NotifyChannel:
        return get_object_or_404(NotifyChannel, project=_project(request, slug), pk=pk)

    def get(self, request: Request, slug: str, pk: int) -> Response:
        channel = self._channel(request, slug, pk)
        return Response(ChannelSerializer(channel, context={"admin": _is_admin(request, channel.project)}).data)

    def patch(self, request: Request, slug: str, pk: int) -> Response:
        channel = self._channel(request, slug, pk)
        require_admin(request, channel.project, "change notifications")
        form = ChannelWriteSerializer(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        _saved(lambda: services.channel_save(project=channel.project, values=dict(form.validated_data),
                                             actor=request.user, channel=channel))
        return Response(ChannelSerializer(channel, context={"admin": True}).data)

    def delete(self, request: Request, slug: str, pk: int) -> Response:
        channel = self._channel(request, slug, pk)
        require_admin(request, channel.project, "change notifications")
        services.channel_delete(channel=channel, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(get=extend_schema(summary="A channel's delivery log, newest first",
                                      responses=responses(AttemptSerializer(many=True), *READ_ERRORS)))
class ChannelLog(ListAPIView):
    serializer_class = AttemptSerializer

    def _channel(self) -> NotifyChannel:
        if not hasattr(self, "_found"):
            self._found = get_object_or_404(NotifyChannel, project=_project(self.request, self.kwargs["slug"]),
                                            pk=self.kwargs["pk"])
        return self._found

    def get_queryset(self) -> QuerySet[NotifyAttempt]:
        return self._channel().log.select_related("delivery").order_by("-at", "-pk")

    def get_serializer_context(self) -> dict[str, Any]:
        channel = self._channel()
        return {**super().get_serializer_context(), "channel": channel,
                "admin": _is_admin(self.request, channel.project)}


class ResumedSerializer(serializers.Serializer[Any]):
    waiting = serializers.IntegerField(help_text="deliveries that waited for the channel, queued again")


@extend_schema_view(post=extend_schema(summary="Resume a paused channel (project admins): what waited is queued",
                                       request=None, responses=responses(ResumedSerializer, *WRITE_ERRORS)))
class ChannelResume(GenericAPIView):
    serializer_class = ResumedSerializer

    def post(self, request: Request, slug: str, pk: int) -> Response:
        channel = get_object_or_404(NotifyChannel, project=_project(request, slug), pk=pk)
        require_admin(request, channel.project, "change notifications")
        waiting = delivery.resume(channel)
        services.channel_resumed(channel=channel, actor=request.user)
        return Response({"waiting": waiting})


@extend_schema_view(post=extend_schema(summary="Send a test message to the channel (project admins), queued",
                                       request=None, responses=responses(TestQueuedSerializer, *WRITE_ERRORS,
                                                                         status=202)))
class ChannelTest(GenericAPIView):
    serializer_class = TestQueuedSerializer

    def post(self, request: Request, slug: str, pk: int) -> Response:
        channel = get_object_or_404(NotifyChannel, project=_project(request, slug), pk=pk)
        require_admin(request, channel.project, "change notifications")
        sent = delivery.send_test(channel)
        return Response({"delivery_id": sent.idempotency_id, "status": sent.status}, status=status.HTTP_202_ACCEPTED)


@extend_schema_view(
    get=extend_schema(summary="The project's notification rules",
                      responses=responses(RuleSerializer(many=True), *READ_ERRORS)),
    post=extend_schema(summary="Add a rule (project admins)", request=RuleWriteSerializer,
                       responses=responses(RuleSerializer, *WRITE_ERRORS, status=201)),
)
class RuleList(ListCreateAPIView):
    serializer_class = RuleSerializer

    def get_queryset(self) -> QuerySet[NotifyRule]:
        return (NotifyRule.objects.filter(project=_project(self.request, self.kwargs["slug"]))
                .prefetch_related("channels").order_by("name", "pk"))

    def create(self, request: Request, *args: Any, slug: str = "", **kwargs: Any) -> Response:
        project = _project(request, slug)
        require_admin(request, project, "change notifications")
        form = RuleWriteSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        values = dict(form.validated_data)
        chans = values.pop("channels", None)
        rule = _saved(lambda: services.rule_save(project=project, values=values, actor=request.user, channels=chans))
        return Response(RuleSerializer(rule).data, status=status.HTTP_201_CREATED)


@extend_schema_view(
    get=extend_schema(summary="One rule", responses=responses(RuleSerializer, *READ_ERRORS)),
    patch=extend_schema(summary="Change a rule (project admins)", request=RuleWriteSerializer,
                        responses=responses(RuleSerializer, *WRITE_ERRORS)),
    delete=extend_schema(summary="Remove a rule (project admins)",
                         responses={204: None, **error_responses(*WRITE_ERRORS)}),
)
class RuleDetail(GenericAPIView):
    serializer_class = RuleSerializer

    def _rule(self, request: Request, slug: str, pk: int) -> NotifyRule:
        return get_object_or_404(NotifyRule, project=_project(request, slug), pk=pk)

    def get(self, request: Request, slug: str, pk: int) -> Response:
        return Response(RuleSerializer(self._rule(request, slug, pk)).data)

    def patch(self, request: Request, slug: str, pk: int) -> Response:
        rule = self._rule(request, slug, pk)
        require_admin(request, rule.project, "change notifications")
        form = RuleWriteSerializer(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        values = dict(form.validated_data)
        chans = values.pop("channels", None)
        _saved(lambda: services.rule_save(project=rule.project, values=values, actor=request.user, channels=chans,
                                          rule=rule))
        return Response(RuleSerializer(rule).data)

    def delete(self, request: Request, slug: str, pk: int) -> Response:
        rule = self._rule(request, slug, pk)
        require_admin(request, rule.project, "change notifications")
        services.rule_delete(rule=rule, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(get=extend_schema(summary="Your notifications (the in-app list), newest first",
                                      responses=responses(NotificationSerializer(many=True), *READ_ERRORS)))
class NotificationList(ListAPIView):
    serializer_class = NotificationSerializer

    def get_queryset(self) -> QuerySet[Notification]:
        return (Notification.objects.filter(user=self.request.user, project__in=visible_projects(self.request))
                .select_related("message", "project").order_by("-created_at", "-pk"))
