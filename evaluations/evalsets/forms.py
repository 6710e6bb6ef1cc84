from __future__ import annotations

from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from evaluations.interop import readers


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A file field that takes several files from one picker (Django's documented recipe)."""

    widget = MultipleFileInput

    def clean(self, data: Any, initial: Any = None) -> list[UploadedFile]:
        if isinstance(data, list | tuple):
            # The recipe's list branch skips FileField's own "required" check on an empty list.
            if not data and self.required:
                raise forms.ValidationError(self.error_messages["required"], code="required")
            return [super(MultipleFileField, self).clean(d, initial) for d in data]
        return [super().clean(data, initial)]


def format_choices() -> list[tuple[str, str]]:
    # A callable, so the choices follow the registered readers without a restart.
    return [("", "Auto-detect"), *((r.name, f"{r.name} — {r.label}") for r in readers())]


class UploadForm(forms.Form):
    files = MultipleFileField(  # type: ignore[assignment]
        label="Eval-set files",
        # The import service names the empty file in its answer; Django's own check would not.
        allow_empty_file=True,
        help_text=".json, .jsonl, .csv, .yaml, an Inspect AI .eval log or a .zip; several files at once for "
                  "formats with companion files.",
    )
    format = forms.ChoiceField(choices=format_choices, required=False, label="Format")
