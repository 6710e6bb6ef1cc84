"""The Django admin, for superusers: users (Django's own), projects and their members."""

from __future__ import annotations

from django.contrib import admin

from evaluations.models import Membership, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    fields = ["user", "role"]
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    fields = ["name", "slug", "description", "archived_at"]  # archived: clear it to bring the project back
    list_display = ["name", "slug", "created_at", "archived_at"]
    list_filter = [("archived_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]
