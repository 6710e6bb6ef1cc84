from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from evaluations.accounts import sso
from evaluations.api.errors import api_not_found
from evaluations.api.otlp import otlp_traces
from evaluations.web.views import signin
from evaluations.web.views.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # The OTLP/HTTP trace receiver: where an OpenTelemetry exporter pointed at evalsite sends.
    path("v1/traces", otlp_traces, name="otlp_traces"),
    path("accounts/login/", signin.LoginView.as_view(), name="login"),
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
    # The admin signs in through evalsite's form (its SSO, its second factor), never its own.
    path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    path("admin/", admin.site.urls),
    path("api/v1/", include("evaluations.api.urls")),
    # The OpenAPI 3 schema and its docs page (Swagger UI, from local static files: no CDN).
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api_schema"), name="api_docs"),
    # Anything else under /api/ is a JSON 404, never the HTML page (and never a slash redirect).
    re_path(r"^api/", api_not_found),
    path("", include("evaluations.web.urls")),
    # Issue 34: SSO (allauth's openid_connect paths, evalsite's views) and the second factor
    path("accounts/oidc/<str:provider_id>/login/", sso.login, name="openid_connect_login"),
    path("accounts/oidc/<str:provider_id>/login/callback/", sso.callback, name="openid_connect_callback"),
    path("accounts/2fa/verify/", signin.twofactor_verify, name="twofactor_verify"),
    path("accounts/2fa/setup/", signin.twofactor_setup, name="twofactor_setup"),
    path("account/2fa/", signin.twofactor_page, name="twofactor"),
    path("account/2fa/disable/", signin.twofactor_disable, name="twofactor_disable"),
    path("signins/", signin.signin_log, name="signin_log"),
]

# Errors outside the API views (middleware, Django's own checks): JSON under /api/, pages elsewhere.
handler400 = "evaluations.api.errors.handler400"
handler403 = "evaluations.api.errors.handler403"
handler404 = "evaluations.api.errors.handler404"
handler500 = "evaluations.api.errors.handler500"
