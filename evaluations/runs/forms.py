"""The New run form: validates everything a run needs before anything is written.

`NewRunForm.cleaned_data["run"]` holds the keyword arguments of `runs.run_create` once the
form is valid: the eval-set version, the config (an edited EvalConfig validated with
pydantic, a saved preset, or the eval set's own), the target (outputs read from the uploaded
file, an HTTP spec, a Python callable or the demo agent), iterations, warm-ups and labels.
Errors keep their location: the JSON path of a config error, the line of a header, the file,
case and line of an outputs problem (`outputs_error`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from pydantic import BaseModel, ValidationError

from evaluations import safejson
from evaluations.converters import parse_id, whole_number
from evaluations.interop import EvalSetImportError, SourceFile
from evaluations.interop import check_size as check_upload_size
from evaluations.jsonschemas import criteria_schema_problems
from evaluations.models import EvalSetVersion, EvaluationConfig, Run
from evaluations.runs.selectors import DEMO_CALLABLE
from evaluations.runs.targets.http import HttpTargetSpec
from evaluations.runs.targets.python import PythonTargetSpec
from evaluations.schemas.evalset import EvalConfig
from evaluations.schemas.outputs import MAX_ITERATIONS

DEMO_FAULTS = [
    ("wrong_tool", "wrong tool"),
    ("wrong_argument", "wrong argument"),
    ("missing_call", "missing call"),
]
CONFIG_SOURCES = [
    ("default", "The eval set's own config"),
    ("preset", "A saved config"),
    ("custom", "Edited JSON"),
]
TARGET_KINDS = [
    ("demo", "Demo agent"),
    ("uploaded", "Upload outputs"),
    ("http", "HTTP endpoint"),
    ("python", "Python callable"),
    ("model", "A model and a prompt"),
    ("traces", "Traces your agent sends"),
]
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 9110 token




def pydantic_errors(error: ValidationError, prefix: str = "") -> list[str]:
    """Each problem with the path it is at: `criteria → trajectory_match → threshold: ...`."""
    out = []
    for e in error.errors():
        path = " → ".join(str(p) for p in e["loc"])
        where = " → ".join(p for p in (prefix, path) if p)
        out.append(f"{where}: {e['msg']}" if where else str(e["msg"]))
    return out


def parse_headers(text: str) -> dict[str, str]:
    """`Name: value` per line; blank lines are skipped. Raises ValidationError naming the line."""
    headers: dict[str, str] = {}
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not HEADER_NAME.match(name):
            problems.append(f"line {number}: expected “Name: value”")
            continue
        headers[name] = value.strip()
    if problems:
        raise forms.ValidationError(problems)
    return headers


class NewRunForm(forms.Form):
    version = forms.TypedChoiceField(coerce=int, label="Eval set")
    config_source = forms.ChoiceField(choices=CONFIG_SOURCES, initial="default", widget=forms.RadioSelect,
                                      label="Evaluation config")
    preset = forms.TypedChoiceField(coerce=int, required=False, label="Saved config", empty_value=None)
    config_json = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
                                  label="Config JSON (AgentFlow EvalConfig)")
    target_kind = forms.ChoiceField(choices=TARGET_KINDS, initial="demo", widget=forms.RadioSelect, label="Target")
    outputs_file = forms.FileField(required=False, allow_empty_file=True, label="Outputs file",
                                   help_text="JSON, JSONL, an ADK result file or an Inspect AI eval log: one object "
                                             "per case and iteration.")
    http_url = forms.CharField(required=False, label="URL", max_length=2000)
    http_headers = forms.CharField(required=False, label="Headers",
                                   widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
                                   help_text="One per line: Name: value")
    http_timeout = forms.FloatField(required=False, min_value=0.1, max_value=3600, label="Timeout (s)")
    python_callable = forms.CharField(required=False, label="Callable", max_length=300,
                                      help_text="package.module:function, importable by the queue workers")
    # A model target (OpenAI-compatible /chat/completions, its tools simulated from the eval set).
    model_base_url = forms.CharField(required=False, label="Base URL", max_length=2000)
    model_name = forms.CharField(required=False, label="Model name", max_length=200)
    model_api_key_env = forms.CharField(required=False, label="API key variable", max_length=200,
                                        initial="OPENAI_API_KEY")
    model_prompt = forms.ChoiceField(required=False, label="Prompt")
    model_system = forms.CharField(required=False, label="System message", widget=forms.Textarea)
    model_user = forms.CharField(required=False, label="User template", widget=forms.Textarea,
                                 initial="{{input}}")
    model_max_steps = forms.IntegerField(required=False, min_value=1, max_value=100, label="Max steps")
    model_temperature = forms.FloatField(required=False, min_value=0, max_value=2, label="Temperature")
    traces_deadline_minutes = forms.IntegerField(
        required=False, min_value=0, max_value=30 * 24 * 60, label="Deadline (minutes)",
        help_text="Cases without a trace by then are missing, and the run is scored. Default: 60.")
    demo_faults = forms.MultipleChoiceField(choices=DEMO_FAULTS, required=False, widget=forms.CheckboxSelectMultiple,
                                            label="Faults")
    demo_rate = forms.FloatField(required=False, min_value=0, max_value=1, label="Share of cases affected")
    demo_slow_seconds = forms.FloatField(required=False, min_value=0, max_value=30, label="Slow answers (s)")
    iterations = forms.IntegerField(min_value=1, max_value=MAX_ITERATIONS, initial=1)
    warmups = forms.IntegerField(min_value=0, max_value=100, initial=0, label="Warm-ups")
    name = forms.CharField(required=False, max_length=255)
    model = forms.CharField(required=False, max_length=200)
    branch = forms.CharField(required=False, max_length=255)
    git_commit = forms.CharField(required=False, max_length=64, label="Commit")
    tags = forms.CharField(required=False, max_length=1000, help_text="Comma-separated")

    def __init__(self, *args: Any, versions: dict[int, EvalSetVersion], presets: dict[int, EvaluationConfig],
                 prompts: list[tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # "<prompt id>:<version>" of the project's stored prompts, or "" for the text typed here
        self.fields["model_prompt"].choices = [("", "the text below"), *(prompts or [])]  # type: ignore[attr-defined]
        self.versions = versions
        self.presets = presets
        self.outputs_error: EvalSetImportError | None = None
        self.fields["version"].choices = [(pk, str(v)) for pk, v in versions.items()]  # type: ignore[attr-defined]
        self.fields["preset"].choices = [("", "—"), *((pk, p.name) for pk, p in presets.items())]  # type: ignore[attr-defined]

    # --- Per-field checks -------------------------------------------------------------------

    def clean_config_json(self) -> EvalConfig | None:
        text = self.cleaned_data.get("config_json") or ""
        if self.data.get("config_source") != "custom":
            return None
        if not text.strip():
            raise forms.ValidationError("Give the config as JSON, or choose another config.")
        try:
            doc = safejson.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        try:
            config = EvalConfig.model_validate(doc)
        except ValidationError as exc:
            raise forms.ValidationError(pydantic_errors(exc)) from None
        problems = criteria_schema_problems(config.criteria)  # remote references, size: refused here
        if problems:
            raise forms.ValidationError(problems)
        return config

    def clean_http_headers(self) -> dict[str, str]:
        return parse_headers(self.cleaned_data.get("http_headers") or "")

    def clean_tags(self) -> list[str]:
        return [t.strip() for t in (self.cleaned_data.get("tags") or "").split(",") if t.strip()]

    # --- The run as a whole -----------------------------------------------------------------

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("target_kind")
        target: dict[str, Any] = {}
        outputs = None
        if kind == "uploaded":
            outputs = self._outputs(data.get("outputs_file"))
        elif kind == "http":
            target = self._spec(HttpTargetSpec, "http_url", {
                "url": (data.get("http_url") or "").strip(),
                "headers": data.get("http_headers") or {},
                **({"timeout_seconds": data["http_timeout"]} if data.get("http_timeout") else {}),
            })
        elif kind == "python":
            target = self._spec(PythonTargetSpec, "python_callable",
                                {"callable": (data.get("python_callable") or "").strip()})
        elif kind == "model":  # checked whole by run_create (model_target_prepare): RunError says where
            target = self._model_target(data)
        elif kind == "traces":  # evaluations/ingest/runs.py makes the run
            minutes = data.get("traces_deadline_minutes")
            target = {"deadline_seconds": minutes * 60} if minutes is not None else {}
        elif kind == "demo":
            target = {"callable": DEMO_CALLABLE}
            faults: dict[str, Any] = dict.fromkeys(data.get("demo_faults") or [], True)
            if data.get("demo_slow_seconds"):
                faults["slow_answer_seconds"] = data["demo_slow_seconds"]
            if faults and data.get("demo_rate") is not None:
                faults["rate"] = data["demo_rate"]
            if faults:
                target["metadata"] = {"faults": faults}

        source = data.get("config_source")
        preset = None
        if source == "preset":
            preset = self.presets.get(data.get("preset") or 0)
            if preset is None:
                self.add_error("preset", "Choose a saved config.")
            else:
                try:
                    EvalConfig.model_validate(preset.config)
                except ValidationError as exc:
                    self.add_error("preset", pydantic_errors(exc, prefix=preset.name))

        version = self.versions.get(data.get("version") or 0)
        if self.errors or version is None:
            return data
        data["run"] = {
            "version": version,
            "target_kind": Run.TargetKind.PYTHON.value if kind == "demo" else kind,
            "target": target,
            "outputs": outputs,
            "config": data.get("config_json") if source == "custom" else None,
            "preset": preset,
            "iterations": data["iterations"],
            "warmups": data["warmups"],
            "name": data.get("name") or "",
            "labels": {"model": data.get("model") or "", "branch": data.get("branch") or "",
                       "git_commit": data.get("git_commit") or "", "tags": data.get("tags") or []},
        }
        return data

    def _model_target(self, data: dict[str, Any]) -> dict[str, Any]:
        base_url, model = (data.get("model_base_url") or "").strip(), (data.get("model_name") or "").strip()
        if not base_url:
            self.add_error("model_base_url", "Give the endpoint's base URL (/chat/completions is added).")
        if not model:
            self.add_error("model_name", "Give the model's name, as the endpoint knows it.")
        target: dict[str, Any] = {"base_url": base_url, "model": model}
        if (data.get("model_api_key_env") or "").strip():
            target["api_key_env"] = data["model_api_key_env"].strip()
        chosen = (data.get("model_prompt") or "").strip()
        prompt_id, _, number = chosen.partition(":")
        prompt_pk, version = parse_id(prompt_id), whole_number(number, minimum=1, maximum=2**31 - 1)
        if prompt_pk is not None and version is not None:
            target["prompt"] = {"prompt_id": prompt_pk, "version": version}
        else:
            if chosen:
                self.add_error("model_prompt", "Choose one of the listed prompt versions, or none.")
            target["prompt"] = {"system": data.get("model_system") or "", "user": data.get("model_user") or ""}
        if data.get("model_max_steps") is not None:
            target["max_steps"] = data["model_max_steps"]
        if data.get("model_temperature") is not None:
            target["temperature"] = data["model_temperature"]
        return target

    def _spec(self, model: type[BaseModel], field: str, values: dict[str, Any]) -> dict[str, Any]:
        try:
            return model.model_validate(values).model_dump(mode="json", exclude_defaults=True)
        except ValidationError as exc:
            self.add_error(field, pydantic_errors(exc))
            return {}

    def _outputs(self, upload: Any) -> Any:
        from evaluations.interop.outputs import read_output_rows

        if upload is None:
            self.add_error("outputs_file", "Choose the outputs file.")
            return None
        try:
            check_upload_size(upload.name, upload.size)
            return read_output_rows([SourceFile(name=upload.name, data=upload.read())])
        except EvalSetImportError as error:
            self.outputs_error = error
            self.add_error("outputs_file", f"The outputs file cannot be used: {error.total} "
                                           f"problem{'s' if error.total != 1 else ''} (listed above).")
            return None
