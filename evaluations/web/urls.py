from django.urls import path

from evaluations.web.views import accounts, compare, demo, drilldown, evalsets, nway, projects, review, trend
from evaluations.web.views import runs as run_views
from evaluations.web.views import triage as triage_views

urlpatterns = [
    path("", run_views.home, name="home"),
    path("evalsets/", evalsets.evalset_list, name="evalset_list"),
    path("evalsets/upload/", evalsets.evalset_upload, name="evalset_upload"),
    path("evalsets/<int:pk>/", evalsets.evalset_detail, name="evalset_detail"),
    path("evalsets/<int:pk>/trend/", trend.evalset_trend, name="evalset_trend"),
    path("evalsets/<int:pk>/leaderboard/", nway.evalset_leaderboard, name="evalset_leaderboard"),
    path("evalsets/versions/<int:pk>/original", evalsets.version_original, name="version_original"),
    path("evalsets/versions/<int:pk>/native.json", evalsets.version_native, name="version_native"),
    path("cases/<int:pk>/", evalsets.case_detail, name="case_detail"),
    path("projects/switch/", evalsets.project_switch, name="project_switch"),
    path("projects/<slug:slug>/members/", projects.project_members, name="project_members"),
    path("projects/<slug:slug>/activity/", projects.project_activity_view, name="project_activity"),
    path("account/", accounts.account, name="account"),
    path("account/tokens/<int:pk>/revoke/", accounts.token_revoke_view, name="account_token_revoke"),
    path("demo/agent/", demo.demo_agent, name="demo_agent"),
    path("compare/", compare.compare, name="compare"),
    path("compare/export.csv", compare.compare_csv, name="compare_csv"),
    path("compare/runs/", nway.nway_compare, name="nway_compare"),
    path("compare/runs/case/", nway.nway_case, name="nway_case"),
    path("compare/runs/export.csv", nway.nway_csv, name="nway_csv"),
    path("runs/<int:run_pk>/cases/<int:result_pk>/", drilldown.run_case, name="run_case"),
    path("triage/", triage_views.triage_update, name="triage_update"),
    path("triage/<int:pk>/comments/", triage_views.triage_comment, name="triage_comment"),
    path("review/", triage_views.review_queue, name="review_queue"),
    path("review/bulk/", review.triage_bulk, name="triage_bulk"),
    path("runs/<int:run_pk>/case/", review.run_case_by_eval_id, name="run_case_by_eval_id"),
    path("runs/", run_views.run_list, name="run_list"),
    path("runs/new/", run_views.run_new, name="run_new"),
    path("runs/compare/", run_views.run_compare_pick, name="run_compare_pick"),
    path("runs/<int:pk>/", run_views.run_detail, name="run_detail"),
    path("runs/<int:pk>/progress/", run_views.run_progress, name="run_progress"),
    path("runs/<int:pk>/cancel/", run_views.run_cancel, name="run_cancel"),
    path("runs/<int:pk>/retry/", run_views.run_retry, name="run_retry"),
    path("runs/<int:pk>/pin/", projects.run_pin_baseline, name="run_pin_baseline"),
]
