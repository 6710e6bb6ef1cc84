from django.urls import path

from evaluations.api import views

urlpatterns = [
    path("evalsets/", views.EvalSetListCreate.as_view(), name="api_evalsets"),
    path("evalsets/<int:pk>/", views.EvalSetDetail.as_view(), name="api_evalset"),
    path("evalsets/<int:pk>/versions/", views.EvalSetVersionList.as_view(), name="api_evalset_versions"),
    path("evalsets/<int:pk>/versions/<int:number>/cases/", views.EvalCaseList.as_view(), name="api_evalset_cases"),
]
