from django.urls import path

from evaluations.views import demo, evalsets

urlpatterns = [
    path("", evalsets.evalset_list, name="home"),
    path("evalsets/", evalsets.evalset_list, name="evalset_list"),
    path("evalsets/upload/", evalsets.evalset_upload, name="evalset_upload"),
    path("evalsets/<int:pk>/", evalsets.evalset_detail, name="evalset_detail"),
    path("evalsets/versions/<int:pk>/original", evalsets.version_original, name="version_original"),
    path("evalsets/versions/<int:pk>/native.json", evalsets.version_native, name="version_native"),
    path("cases/<int:pk>/", evalsets.case_detail, name="case_detail"),
    path("projects/switch/", evalsets.project_switch, name="project_switch"),
    path("demo/agent/", demo.demo_agent, name="demo_agent"),
]
