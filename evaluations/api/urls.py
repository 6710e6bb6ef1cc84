from django.urls import path

from evaluations.api import runs, views

urlpatterns = [
    path("evalsets/", views.EvalSetListCreate.as_view(), name="api_evalsets"),
    path("evalsets/<int:pk>/", views.EvalSetDetail.as_view(), name="api_evalset"),
    path("evalsets/<int:pk>/versions/", views.EvalSetVersionList.as_view(), name="api_evalset_versions"),
    path("evalsets/<int:pk>/versions/<int:number>/cases/", views.EvalCaseList.as_view(), name="api_evalset_cases"),
    path("runs/", runs.RunListCreate.as_view(), name="api_runs"),
    path("runs/<int:pk>/", runs.RunDetail.as_view(), name="api_run"),
    path("runs/<int:pk>/cancel/", runs.RunCancel.as_view(), name="api_run_cancel"),
    path("runs/<int:pk>/retry/", runs.RunRetry.as_view(), name="api_run_retry"),
    path("runs/<int:pk>/results/", runs.RunResults.as_view(), name="api_run_results"),
    path("runs/<int:pk>/report/", runs.RunReport.as_view(), name="api_run_report"),
    path("runs/<int:pk>/results.csv", runs.RunCsv.as_view(), name="api_run_csv"),
    path("runs/<int:pk>/upsonic/", runs.RunUpsonic.as_view(), name="api_run_upsonic"),
    path("runs/<int:pk>/metrics/", runs.RunMetrics.as_view(), name="api_run_metrics"),
    path("configs/", runs.EvaluationConfigList.as_view(), name="api_configs"),
]
