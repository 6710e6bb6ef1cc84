"""The demo agent over HTTP: evalsite serves an agent to evaluate, so a fresh install can run
an HTTP evaluation of the demo eval set against itself."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError

from evaluations import safejson
from evaluations.accounts.tokens import user_from_request_token
from evaluations.demo.agent import parse_faults, respond
from evaluations.runs.targets.contract import TurnRequest


def _faults_from_query(request: HttpRequest) -> dict[str, Any] | None:
    """`?faults=wrong_argument,missing_call&rate=0.3&slow_answer_seconds=2` as a faults dict."""
    names = [n.strip() for n in request.GET.get("faults", "").split(",") if n.strip()]
    faults: dict[str, Any] = dict.fromkeys(names, True)
    for key in ("rate", "slow_answer_seconds"):
        if key in request.GET:
            faults[key] = request.GET[key]
    return faults or None


def _unauthorized() -> JsonResponse:
    response = JsonResponse({"error": "log in, or send an API token: `Authorization: Token <token>`"}, status=401)
    response["WWW-Authenticate"] = 'Token realm="api"'
    return response


# No CSRF token: the demo agent reads only its own fixed tables, keeps no state and touches
# no project data, and its callers are agents' test harnesses (sending an API token in the
# HTTP target's headers), not browsers. It still needs a user, so that only /healthz, login
# and password reset are open to the world.
@csrf_exempt
def demo_agent(request: HttpRequest) -> JsonResponse:
    """POST a TurnRequest as JSON; the answer is a TurnReply."""
    if not request.user.is_authenticated and user_from_request_token(request) is None:
        return _unauthorized()
    if request.method != "POST":
        return JsonResponse({"error": "POST a JSON TurnRequest"}, status=405, headers={"Allow": "POST"})
    try:
        body = safejson.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        return JsonResponse({"error": "the body must be a JSON TurnRequest"}, status=400)
    try:
        turn = TurnRequest.model_validate(body)
    except ValidationError as exc:
        problems = [
            {"path": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
            for e in exc.errors(include_url=False, include_input=False)
        ]
        return JsonResponse({"error": "not a TurnRequest", "problems": problems}, status=400)
    payload = turn.model_dump(mode="json")
    query_faults = _faults_from_query(request)
    if query_faults is not None:
        payload["metadata"]["faults"] = query_faults  # the URL's faults win over the request's
    try:
        parse_faults(payload["metadata"].get("faults"))
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse(respond(payload))
