from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from evaluations.api.errors import api_not_found
from evaluations.api.otlp import otlp_traces
from evaluations.web.views.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # The OTLP/HTTP trace receiver: where an OpenTelemetry exporter pointed at evalsite sends.
    path("v1/traces", otlp_traces, name="otlp_traces"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", auth_views.PasswordChangeDoneView.as_view(),
         name="password_change_done"),
    # Public: someone who forgot their password is not logged in.
    path("accounts/password_reset/", auth_views.PasswordResetView.as_view(), name="password_reset"),
    path("accounts/password_reset/done/", auth_views.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path("accounts/reset/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    path("accounts/reset/done/", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("evaluations.api.urls")),
    # The OpenAPI 3 schema and its docs page (Swagger UI, from local static files: no CDN).
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api_schema"), name="api_docs"),
    # Anything else under /api/ is a JSON 404, never the HTML page (and never a slash redirect).
    re_path(r"^api/", api_not_found),
    path("", include("evaluations.web.urls")),
]

# Errors outside the API views (middleware, Django's own checks): JSON under /api/, pages elsewhere.
handler400 = "evaluations.api.errors.handler400"
handler403 = "evaluations.api.errors.handler403"
handler404 = "evaluations.api.errors.handler404"
handler500 = "evaluations.api.errors.handler500"
