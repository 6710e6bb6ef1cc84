"""Projects, members, the activity feed and API tokens."""

from __future__ import annotations

from rest_framework import serializers

from evaluations.models import ApiToken, AuditEvent, Membership, Project


class ProjectSerializer(serializers.ModelSerializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices, read_only=True,
                                   help_text="your role here")

    class Meta:
        model = Project
        fields = ["id", "slug", "name", "description", "created_at", "role"]


class ProjectCreateSerializer(serializers.Serializer):
    slug = serializers.SlugField(max_length=64, help_text="the project's name in URLs and the API")
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000)


class DeletedSerializer(serializers.Serializer):
    runs = serializers.IntegerField(help_text="runs deleted")
    results = serializers.IntegerField(help_text="their results")
    versions = serializers.IntegerField(help_text="eval-set versions deleted (0 for a run)")
    rows = serializers.IntegerField(help_text="database rows deleted, everything included")


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    email = serializers.CharField(source="user.email", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "username", "email", "role", "created_at"]


class MemberAddSerializer(serializers.Serializer):
    user = serializers.CharField(max_length=254, help_text="an active user's username or email")
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class MemberChangeSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class EventSerializer(serializers.ModelSerializer):
    actor = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = AuditEvent
        fields = ["id", "created_at", "actor", "verb", "object_type", "object_id", "summary", "data"]


class TokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked_at"]


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="what uses it, e.g. `CI on main`")


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="the token itself: shown this once, never again")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


class RevokedSerializer(serializers.Serializer):
    revoked = serializers.BooleanField(help_text="false when it already was revoked")
    token = TokenSerializer()
