"""The results-import page's form (the page: `web/views/results_import.py`)."""

from __future__ import annotations

from django import forms

from evaluations.models import EvalSet, Project


class ResultsImportForm(forms.Form):
    file = forms.FileField(
        label="Results file", allow_empty_file=True,  # the import service names the empty file itself
        help_text="ADK .evalset_result.json (.adk/eval_history), a DeepEval / Confident AI test run, an AgentFlow "
                  "EvalReport, UiPath `uipath eval --output-file` results (JSON), promptfoo's "
                  "`promptfoo eval -o results.json` (JSON), or an Inspect AI eval log (.eval or .json).")
    evalset = forms.ModelChoiceField(
        queryset=EvalSet.objects.none(), required=False, label="Eval set",
        empty_label="From the file (created from its cases, else the eval set it names)")
    rescore = forms.BooleanField(required=False, label="Also rescore the same outputs with evalsite")

    def __init__(self, *args: object, project: Project, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        field = self.fields["evalset"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = EvalSet.objects.filter(project=project).order_by("eval_set_id")
