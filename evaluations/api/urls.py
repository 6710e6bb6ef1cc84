from django.urls import path, register_converter

from evaluations.api import common as _schema_extensions  # noqa: F401 - registers the token auth scheme
from evaluations.api import compare, imports, metrics, nway, projects, runs, traces, triage, views
from evaluations.converters import IdConverter

# `<id:pk>`: an integer of at most 18 digits (a longer one is a 404, not a database overflow).
register_converter(IdConverter, "id")

urlpatterns = [
    path("evalsets/", views.EvalSetListCreate.as_view(), name="api_evalsets"),
    path("evalsets/<id:pk>/", views.EvalSetDetail.as_view(), name="api_evalset"),
    path("evalsets/<id:pk>/versions/", views.EvalSetVersionList.as_view(), name="api_evalset_versions"),
    path("evalsets/<id:pk>/versions/<id:number>/cases/", views.EvalCaseList.as_view(), name="api_evalset_cases"),
    path("evalsets/<id:pk>/versions/<id:number>/", views.EvalSetVersionDetail.as_view(), name="api_evalset_version"),
    path("evalsets/<id:pk>/versions/<id:number>/native/", views.VersionNative.as_view(),
         name="api_evalset_version_native"),
    path("evalsets/<id:pk>/versions/<id:number>/original/", views.VersionOriginal.as_view(),
         name="api_evalset_version_original"),
    path("evalsets/<id:pk>/trend/", views.EvalSetTrend.as_view(), name="api_evalset_trend"),
    path("cases/<id:pk>/", views.EvalCaseDetail.as_view(), name="api_case"),
    path("runs/", runs.RunListCreate.as_view(), name="api_runs"),
    path("runs/import/", imports.ResultsImport.as_view(), name="api_runs_import"),
    path("runs/<id:pk>/rescore/", imports.RunRescore.as_view(), name="api_run_rescore"),
    path("runs/<id:pk>/", runs.RunDetail.as_view(), name="api_run"),
    path("runs/<id:pk>/cancel/", runs.RunCancel.as_view(), name="api_run_cancel"),
    path("runs/<id:pk>/retry/", runs.RunRetry.as_view(), name="api_run_retry"),
    path("runs/<id:pk>/results/", runs.RunResults.as_view(), name="api_run_results"),
    path("runs/<id:pk>/report/", runs.RunReport.as_view(), name="api_run_report"),
    path("runs/<id:pk>/results.csv", runs.RunCsv.as_view(), name="api_run_csv"),
    path("runs/<id:pk>/upsonic/", runs.RunUpsonic.as_view(), name="api_run_upsonic"),
    path("runs/<id:pk>/metrics.json", runs.RunMetricRecords.as_view(), name="api_run_metric_records"),
    path("runs/<id:pk>/metrics/", metrics.RunMetrics.as_view(), name="api_run_metrics"),
    path("runs/<id:pk>/metrics/results/", metrics.RunMetricResults.as_view(), name="api_run_metric_results"),
    path("runs/<id:pk>/wide/", metrics.RunWideTable.as_view(), name="api_run_wide"),
    path("runs/<id:pk>/summary/", runs.RunSummary.as_view(), name="api_run_summary"),
    path("runs/<id:pk>/results/<id:result_pk>/", runs.RunResultDetail.as_view(), name="api_run_result"),
    path("runs/<id:pk>/pin/", runs.RunPin.as_view(), name="api_run_pin"),
    path("configs/", runs.EvaluationConfigList.as_view(), name="api_configs"),
    path("traces/", traces.TraceList.as_view(), name="api_traces"),
    path("traces/<id:pk>/", traces.TraceDetail.as_view(), name="api_trace"),
    path("triage/", triage.TriageList.as_view(), name="api_triage"),
    path("triage/<id:pk>/", triage.TriageDetail.as_view(), name="api_triage_detail"),
    path("triage/<id:pk>/comments/", triage.TriageComments.as_view(), name="api_triage_comments"),
    path("review/", triage.ReviewQueue.as_view(), name="api_review"),
    path("projects/", projects.ProjectList.as_view(), name="api_projects"),
    path("projects/<slug:slug>/", projects.ProjectDetail.as_view(), name="api_project"),
    path("projects/<slug:slug>/members/", projects.MemberList.as_view(), name="api_project_members"),
    path("projects/<slug:slug>/members/<id:pk>/", projects.MemberDetail.as_view(), name="api_project_member"),
    path("projects/<slug:slug>/activity/", projects.ProjectActivity.as_view(), name="api_project_activity"),
    path("tokens/", projects.TokenList.as_view(), name="api_tokens"),
    path("tokens/<id:pk>/revoke/", projects.TokenRevoke.as_view(), name="api_token_revoke"),
    path("compare/", compare.CompareView.as_view(), name="api_compare"),
    path("compare/runs/", nway.NwayCompareView.as_view(), name="api_compare_runs"),
]
