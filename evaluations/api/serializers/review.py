"""Triage, comments, the review queue, people's grades, judge calibration and causes."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from evaluations.api.serializers.fields import id_field
from evaluations.converters import MAX_ID
from evaluations.models import Comment, HumanGrade, Triage


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


class TriageSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    assignee = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    updated_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    evalset = serializers.IntegerField(source="evalset_id", read_only=True)
    baseline = serializers.IntegerField(source="baseline_id", read_only=True)
    candidate = serializers.IntegerField(source="candidate_id", read_only=True)
    comment_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Triage
        fields = ["id", "project", "evalset", "branch", "eval_id", "baseline", "candidate", "status", "assignee",
                  "created_at", "updated_at", "updated_by", "comment_count"]


class HistoryEntrySerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    actor = serializers.CharField(allow_blank=True, help_text="a username; '' when evalsite closed it (passed again)")
    kind = serializers.ChoiceField(choices=[("change", "change"), ("comment", "comment")])
    change = serializers.CharField(help_text="`status open → confirmed, assignee none → bob`, or `commented`")
    summary = serializers.CharField()
    before = serializers.DictField()
    after = serializers.DictField()
    comment_id = serializers.IntegerField(allow_null=True)


class TriageQuery(serializers.Serializer):
    project = serializers.SlugField(required=False)
    candidate = id_field(required=False)
    baseline = id_field(required=False)
    evalset = id_field(required=False)
    eval_id = serializers.CharField(required=False, max_length=255)
    status = serializers.ChoiceField(choices=Triage.Status.choices, required=False)
    assignee = serializers.CharField(required=False, max_length=150,
                                     help_text="a username, `me`, or `none` for unassigned")


class TriageChangeSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Triage.Status.choices, required=False)
    assignee = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=150,
                                     help_text="a member's username; null or empty to unassign")


class TriageUpdateSerializer(TriageChangeSerializer):
    """Triage a case of a comparison: the row is created on first use."""

    candidate = id_field()
    baseline = id_field()
    eval_id = serializers.CharField(max_length=255, help_text="the case")
    comment = serializers.CharField(required=False, allow_blank=True, max_length=10_000,
                                    help_text="a first comment (Markdown), added with the change")


class CommentSerializer(serializers.ModelSerializer):
    author = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    triage = serializers.IntegerField(source="triage_id", read_only=True)
    parent = serializers.IntegerField(source="parent_id", read_only=True, allow_null=True)
    html = serializers.SerializerMethodField(help_text="the body rendered from Markdown and sanitised")

    class Meta:
        model = Comment
        fields = ["id", "triage", "parent", "author", "body", "html", "created_at"]

    def get_html(self, comment: Comment) -> str:
        from evaluations.review.triage import render_comment

        return str(render_comment(comment.body))


class CommentCreateSerializer(serializers.Serializer):
    body = serializers.CharField(max_length=10_000, help_text="Markdown")
    parent = id_field(required=False, allow_null=True, help_text="the comment this one answers")


class QueueRowSerializer(serializers.Serializer):
    evalset_id = serializers.IntegerField()
    evalset_name = serializers.CharField()
    branch = serializers.CharField(allow_blank=True, help_text="the candidate's branch: a triage decision "
                                   "belongs to the eval set, branch and case ('' for runs without a branch)")
    eval_id = serializers.CharField()
    baseline_id = serializers.IntegerField()
    baseline_name = serializers.CharField()
    candidate_id = serializers.IntegerField()
    candidate_name = serializers.CharField()
    status = serializers.ChoiceField(choices=Triage.Status.choices)
    triaged = serializers.BooleanField()
    assignee = serializers.CharField(allow_null=True)
    last_comment_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField(allow_null=True, help_text="the case's drill-down page")


class QueuePageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    num_pages = serializers.IntegerField()
    results = QueueRowSerializer(many=True)


class ReviewQuery(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="default: your first project")
    tab = serializers.ChoiceField(choices=[("assigned", "assigned"), ("untriaged", "untriaged")],
                                  required=False, default="assigned")
    page = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, default=1)
    evalset = id_field(required=False)
    branch = serializers.CharField(required=False, allow_blank=True, max_length=255)
    criterion = serializers.CharField(required=False, max_length=100, help_text="untriaged: its score dropped")
    assignee = serializers.CharField(required=False, max_length=150,
                                     help_text="a username or `none`; on the assigned tab, whose (default: yours)")
    state = serializers.ChoiceField(choices=[("open", "open"), ("all", "all")], required=False, default="open",
                                    help_text="assigned tab: open cases only (default), or all")


class BulkCaseSerializer(serializers.Serializer):
    candidate = id_field(help_text="the run the case regressed in")
    baseline = id_field(help_text="the run it is compared with")
    eval_id = serializers.CharField(max_length=255)


class BulkFiltersSerializer(serializers.Serializer):
    """Every case of a queue tab these filters keep (the page's "all N cases"), as `GET
    /api/v1/review/` reads them."""

    tab = serializers.ChoiceField(choices=[("assigned", "assigned"), ("untriaged", "untriaged")],
                                  default="untriaged")
    evalset = id_field(required=False)
    branch = serializers.CharField(required=False, allow_blank=True, max_length=255)
    criterion = serializers.CharField(required=False, allow_blank=True, max_length=100)
    assignee = serializers.CharField(required=False, allow_blank=True, max_length=150)
    state = serializers.ChoiceField(choices=[("open", "open"), ("all", "all")], default="open")


class BulkTriageSerializer(serializers.Serializer):
    """The review queue's bulk action: a status, an assignee and/or a comment over the cases
    named (`cases`) or every case the filters keep (`filters`), all or nothing."""

    project = serializers.SlugField(required=False, help_text="default: your only project")
    cases = BulkCaseSerializer(many=True, required=False, max_length=1001)
    filters = BulkFiltersSerializer(required=False)
    status = serializers.ChoiceField(choices=Triage.Status.choices, required=False)
    assignee = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=150,
                                     help_text="a member's username; null or empty to unassign; leave out to keep")
    comment = serializers.CharField(required=False, allow_blank=True, max_length=10_000,
                                    help_text="added to each case (Markdown); its @mentions are told once")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("cases" in attrs) == ("filters" in attrs):
            raise serializers.ValidationError({"cases": ["name the cases, or give the filters that keep them "
                                                         "(one of `cases` and `filters`)"]})
        return attrs


class BulkOutcomeSerializer(serializers.Serializer):
    cases = serializers.IntegerField(help_text="cases the action applied to")
    commented = serializers.IntegerField(help_text="comments added")


class ReportQuery(serializers.Serializer):
    date_from = serializers.DateField(required=False, help_text="YYYY-MM-DD, included (default: 6 days before `to`)")
    date_to = serializers.DateField(required=False, help_text="YYYY-MM-DD, included (default: today)")


class ReportRunSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    title = serializers.CharField()
    status = serializers.CharField()
    model = serializers.CharField()
    cases = serializers.IntegerField(source="progress.cases")
    done = serializers.IntegerField(source="progress.done")
    failed = serializers.IntegerField(source="progress.failed")
    errored = serializers.IntegerField(source="progress.errored")
    created_at = serializers.DateTimeField()


class ReportBranchSerializer(serializers.Serializer):
    evalset = serializers.CharField(source="evalset_name")
    branch = serializers.CharField()
    runs = serializers.IntegerField()
    completed = serializers.IntegerField()
    latest = ReportRunSerializer(allow_null=True, help_text="the latest completed run in the period")


class ReportDecisionSerializer(serializers.Serializer):
    triage = serializers.IntegerField(source="pk")
    evalset = serializers.CharField(source="evalset_name")
    branch = serializers.CharField()
    eval_id = serializers.CharField()
    status = serializers.CharField()
    assignee = serializers.CharField()
    decided_by = serializers.CharField(help_text="the last person who changed it")
    closed_by_run = serializers.BooleanField(help_text="fixed by evalsite: the case passed again")
    opened_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    time_to_fix_seconds = serializers.FloatField(allow_null=True)
    last_comment = serializers.CharField()
    thread_url = serializers.CharField()


class ReportSerializer(serializers.Serializer):
    """The review report of a project and period: what the page, its Markdown and CSV say."""

    project = serializers.CharField(source="project.slug")
    date_from = serializers.DateField(source="period.start")
    date_to = serializers.DateField(source="period.end")
    run_count = serializers.IntegerField()
    runs = ReportBranchSerializer(many=True)
    status_counts = serializers.DictField(child=serializers.IntegerField(), help_text="decisions by status")
    decision_count = serializers.IntegerField()
    untriaged = serializers.IntegerField(help_text="regressions still failing and undecided now")
    median_time_to_fix_seconds = serializers.FloatField(allow_null=True)
    decisions = ReportDecisionSerializer(many=True, help_text="every decision made, or still open, in the period")


class ActivityQuery(serializers.Serializer):
    actor = serializers.CharField(required=False, max_length=150, help_text="a username, or `system`")
    eval_id = serializers.CharField(required=False, max_length=255)
    branch = serializers.CharField(required=False, allow_blank=True, max_length=255)
    kind = serializers.CharField(required=False, max_length=32, help_text="a verb (`triage.changed`) or family")
    date_from = serializers.DateField(required=False, help_text="YYYY-MM-DD, included")
    date_to = serializers.DateField(required=False, help_text="YYYY-MM-DD, included")


class GradeSerializer(serializers.ModelSerializer):
    grader = serializers.SlugRelatedField(slug_field="username", read_only=True)
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    run = serializers.IntegerField(source="run_id", read_only=True)
    result = serializers.IntegerField(source="result_id", read_only=True)
    verdict = serializers.SerializerMethodField(help_text="pass or fail")

    class Meta:
        model = HumanGrade
        fields = ["id", "project", "run", "result", "criterion", "grader", "verdict", "passed", "score", "note",
                  "created_at", "updated_at"]

    def get_verdict(self, grade: HumanGrade) -> str:
        return "pass" if grade.passed else "fail"


class GradeChangeSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=[("pass", "pass"), ("fail", "fail")])
    score = serializers.FloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0,
                                   help_text="optional, on the automatic score's scale [0, 1]")
    note = serializers.CharField(required=False, allow_blank=True, max_length=5_000, trim_whitespace=False)


class GradeCreateSerializer(GradeChangeSerializer):
    """Grade a criterion of a result: your grade is created, or changed if you graded it before."""

    result = id_field(help_text="the result (a case of a run)")
    criterion = serializers.CharField(max_length=100)


class GradeQuery(serializers.Serializer):
    project = serializers.SlugField(required=False)
    run = id_field(required=False)
    result = id_field(required=False)
    criterion = serializers.CharField(required=False, max_length=100)
    grader = serializers.CharField(required=False, max_length=150, help_text="a username, or `me`")


class GradingQueueQuery(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="default: your first project")
    evalset = id_field(required=False)
    run = id_field(required=False, help_text="sample this run instead of each eval set's latest")
    criterion = serializers.CharField(required=False, max_length=100)
    judge_model = serializers.CharField(required=False, max_length=200)
    prompt_version = serializers.CharField(required=False, max_length=64, help_text="`-` for none recorded")
    page = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, default=1)
    kind = serializers.ChoiceField(
        choices=[("llm", "LLM-judged only"), ("deterministic", "deterministic only")],
        required=False,
        help_text="`llm`: the criteria an LLM judge scored (what the calibration counts); `deterministic`: the others",
    )


class GradeRowSerializer(serializers.Serializer):
    grader = serializers.CharField()
    verdict = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    note = serializers.CharField()


class GradingTurnSerializer(serializers.Serializer):
    user = serializers.CharField(allow_null=True, help_text="the user's message; null for a turn nothing expected")
    expected_response = serializers.CharField(allow_null=True)
    actual_response = serializers.CharField(allow_null=True)
    tool_calls = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="the step-aligned calls counted by kind: matched, args_differ, missing, unexpected",
    )


class GradingQueueItemSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    disagreement = serializers.BooleanField()
    run = serializers.IntegerField()
    result = serializers.IntegerField()
    criterion = serializers.CharField()
    eval_id = serializers.CharField()
    evalset = serializers.CharField()
    status = serializers.CharField()
    automatic_passed = serializers.BooleanField(allow_null=True)
    automatic_score = serializers.FloatField(allow_null=True)
    output = serializers.CharField(help_text="the first turn's final response, on one line")
    turns = GradingTurnSerializer(many=True, help_text="what the item is graded against, turn by turn")
    justification = serializers.JSONField(allow_null=True, help_text="the automatic score's justification")
    score_error = serializers.CharField(help_text="why the evaluator could not score, if it could not")
    grades = GradeRowSerializer(many=True)
    url = serializers.CharField(help_text="the result's drill-down page")


class GradingQueueSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    disagreements = serializers.IntegerField(help_text="the first this many items are disagreements")
    page = serializers.IntegerField()
    num_pages = serializers.IntegerField()
    results = GradingQueueItemSerializer(many=True)


class CalibrationQuery(serializers.Serializer):
    project = serializers.SlugField(required=False, help_text="default: your first project")
    criterion = serializers.CharField(required=False, max_length=100)


class ConfusionSerializer(serializers.Serializer):
    judge_pass_people_pass = serializers.IntegerField()
    judge_pass_people_fail = serializers.IntegerField()
    judge_fail_people_pass = serializers.IntegerField()
    judge_fail_people_fail = serializers.IntegerField()


class CalibrationSerializer(serializers.Serializer):
    criterion = serializers.CharField()
    judge_model = serializers.CharField()
    prompt_version = serializers.CharField(help_text="empty when none was recorded")
    items = serializers.IntegerField(help_text="graded results, tied votes included")
    compared = serializers.IntegerField(help_text="results with a majority verdict, compared with the judge")
    ties = serializers.IntegerField()
    accuracy = serializers.FloatField(allow_null=True)
    cohen_kappa = serializers.FloatField(allow_null=True)
    confusion = ConfusionSerializer()
    graders_items = serializers.IntegerField(help_text="results graded by two people or more")
    graders_observed_agreement = serializers.FloatField(allow_null=True)
    graders_fleiss_kappa = serializers.FloatField(allow_null=True)
    disagreements_url = serializers.CharField(help_text="the grading queue filtered to this judge")


class CauseExampleSerializer(serializers.Serializer):
    eval_id = serializers.CharField()
    result_id = serializers.IntegerField(allow_null=True, help_text="the example's result (its drill-down)")
    run_id = serializers.IntegerField(help_text="whose result: the baseline's for a gone cause")
    detail = serializers.CharField(help_text="the example's own line, values and all")


class CauseSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="the cause's id: `?cause=` on the pages")
    signature = serializers.CharField(help_text="what near-identical failures share: tools, argument paths, "
                                                "kinds of change, normalised messages")
    kind = serializers.CharField()
    cases = serializers.IntegerField(help_text="cases it hit (0 for a gone cause)")
    share = serializers.FloatField(help_text="of the run's failing cases")
    criteria = serializers.ListField(child=serializers.CharField(), help_text="criteria it failed")
    example = CauseExampleSerializer()
    change = serializers.ChoiceField(choices=["new", "grown", "shrunk", "same", "gone"], required=False,
                                     help_text="on a comparison: against the baseline's causes")
    baseline_cases = serializers.IntegerField(allow_null=True, required=False)


class CausesSerializer(serializers.Serializer):
    failing_cases = serializers.IntegerField()
    total = serializers.IntegerField(help_text="causes in all; `items` lists the first ones, most cases first")
    items = CauseSerializer(many=True)


class RunCausesSerializer(CausesSerializer):
    run = serializers.IntegerField()
    final = serializers.BooleanField(help_text="false while the run is going: its causes are grouped when it ends")
