"""The site-wide sign-in log through the API, for superusers (the `/signins/` page's twin):
for a SIEM or a script that watches failed sign-ins."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.generics import ListAPIView

from evaluations.accounts.signins import signin_events
from evaluations.api.common import query, responses
from evaluations.api.errors import READ_ERRORS
from evaluations.api.serializers import EventSerializer
from evaluations.models import AuditEvent


class SigninQuery(serializers.Serializer):
    failures = serializers.BooleanField(required=False, default=False, help_text="only the failed sign-ins")


@extend_schema_view(get=extend_schema(
    summary="The sign-in log: sign-ins and failed tries (method, reason, address in `data`), second factors "
            "set up or turned off, roles changed by SSO; newest first; superusers only",
    parameters=[SigninQuery], responses=responses(EventSerializer(many=True), *READ_ERRORS)))
class SigninLog(ListAPIView):
    serializer_class = EventSerializer

    def get_queryset(self) -> QuerySet[AuditEvent]:
        if not getattr(self.request.user, "is_superuser", False):
            raise PermissionDenied("the sign-in log is for superusers")
        params = query(SigninQuery, self.request)
        return signin_events(failures_only=bool(params.get("failures"))).select_related("actor")
