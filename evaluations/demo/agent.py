"""The demo travel agent: deterministic, offline, and good enough to pass its own eval set.

It answers one turn of the turn contract (`evaluations.runs.targets.contract`): `respond()` takes
a `TurnRequest` as a dict and returns a `TurnReply` dict. It is reachable as the Python
callable `evaluations.demo.agent:respond` and over HTTP at `/demo/agent/`
(`evaluations.web.views.demo`). Its tools read fixed tables: get_weather, get_forecast,
search_flights, book_flight, get_order, cancel_order. It keeps no state between turns: a
follow-up ("And tomorrow?", "Book it for Ana Lopez.", "Please cancel it.") is understood
from the conversation history that comes with each request.

Faults, for trying evaluators on an agent that misbehaves: `metadata["faults"]` in the
request (the Python target's `metadata` setting puts it there; the HTTP view reads the
query string, e.g. `/demo/agent/?faults=wrong_argument,missing_call&rate=0.3`). Either a
dict `{"wrong_tool": true, "wrong_argument": true, "missing_call": true,
"slow_answer_seconds": 2, "rate": 0.5}`, a list of names, or a comma-separated string.

- wrong_tool: the first tool call of a turn goes to a sibling tool (weather <-> forecast,
  search <-> book, get <-> cancel order);
- wrong_argument: the first argument of the first call gets a plausible wrong value;
- missing_call: the last tool call of a turn is skipped;
- slow_answer_seconds: the answer waits that long;
- rate: the share of cases affected (default 1). Which cases is decided by a hash of the
  eval_id, so the same cases misbehave on every run and every iteration.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evaluations.runs.targets.contract import TurnRequest

# --- The tables the tools read ----------------------------------------------------------------

WEATHER = {
    "Tokyo": (22, "clear"), "Paris": (16, "cloudy"), "Rome": (19, "sunny"), "Oslo": (3, "snowy"),
    "Berlin": (9, "windy"), "Lisbon": (20, "sunny"), "Madrid": (17, "clear"), "London": (12, "drizzly"),
}
FORECAST = {("Paris", 1): (18, "light rain"), ("Tokyo", 1): (24, "sunshine"), ("Oslo", 1): (1, "snow")}
AIRPORTS = {
    "Berlin": "BER", "Lisbon": "LIS", "Madrid": "MAD", "Rome": "FCO", "Paris": "CDG", "Tokyo": "HND",
    "Oslo": "OSL", "London": "LHR",
}
FLIGHTS = {
    ("BER", "LIS", "2026-12-05"): [
        {"flight": "LH 1166", "departs": "06:50", "arrives": "09:10", "price_eur": 164},
        {"flight": "TP 531", "departs": "09:40", "arrives": "11:55", "price_eur": 129},
    ],
    ("MAD", "FCO", "2026-12-12"): [{"flight": "IB 3230", "departs": "07:15", "arrives": "09:35", "price_eur": 98}],
}
BOOKING_CODES = {("IB 3230", "Ana Lopez"): "QX7P2L"}
ORDERS: dict[str, dict[str, Any]] = {
    "1042": {"status": "shipped", "items": "two travel adapters", "total_eur": 24.0,
             "shipped_on": "2026-11-18", "arrives_on": "2026-11-22"},
    "2001": {"status": "processing", "items": "one pair of running shoes", "total_eur": 89.90},
}
CAPABILITIES = "I can look up weather and forecasts, search and book flights, and check or cancel orders."
CANNOT_HELP = "Sorry, I can only help with weather, flights and orders."


# --- Tools ------------------------------------------------------------------------------------


def get_weather(args: dict[str, Any]) -> dict[str, Any]:
    city = args.get("city")
    if city not in WEATHER:
        return {"error": f"no weather for {city!r}"}
    temp, condition = WEATHER[city]
    return {"city": city, "temp_c": temp, "condition": condition}


def get_forecast(args: dict[str, Any]) -> dict[str, Any]:
    city, days = args.get("city"), args.get("days", 1)
    if city not in WEATHER or not isinstance(days, int) or not 1 <= days <= 7:
        return {"error": f"no forecast for {city!r} in {days!r} days"}
    temp, condition = FORECAST.get((city, days), (WEATHER[city][0] + days, WEATHER[city][1]))
    return {"city": city, "days": days, "temp_c": temp, "condition": condition}


def search_flights(args: dict[str, Any]) -> dict[str, Any]:
    origin, destination, date = args.get("origin"), args.get("destination"), args.get("date")
    if not (isinstance(origin, str) and isinstance(destination, str) and isinstance(date, str)):
        return {"error": "origin, destination and date are required"}
    return {"flights": FLIGHTS.get((origin, destination, date), [])}


def book_flight(args: dict[str, Any]) -> dict[str, Any]:
    flight, passenger = args.get("flight"), args.get("passenger")
    if not isinstance(flight, str) or not isinstance(passenger, str):
        return {"error": "flight and passenger are required"}
    if not any(f["flight"] == flight for flights in FLIGHTS.values() for f in flights):
        return {"error": f"no flight {flight}"}
    code = BOOKING_CODES.get((flight, passenger))
    if code is None:
        code = hashlib.sha256(f"{flight}|{passenger}".encode()).hexdigest()[:6].upper()
    return {"flight": flight, "passenger": passenger, "confirmation": code}


def get_order(args: dict[str, Any]) -> dict[str, Any]:
    order_id = args.get("order_id")
    if order_id not in ORDERS:
        return {"error": f"no order {order_id}"}
    return {"order_id": order_id, **ORDERS[order_id]}


def cancel_order(args: dict[str, Any]) -> dict[str, Any]:
    order = get_order(args)
    if "error" in order:
        return order
    if order["status"] == "shipped":
        return {"error": f"order {order['order_id']} has shipped"}
    return {"order_id": order["order_id"], "status": "cancelled", "refund_eur": order["total_eur"]}


TOOLS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "get_weather": get_weather, "get_forecast": get_forecast, "search_flights": search_flights,
    "book_flight": book_flight, "get_order": get_order, "cancel_order": cancel_order,
}
WRONG_TOOL = {
    "get_weather": "get_forecast", "get_forecast": "get_weather", "search_flights": "book_flight",
    "book_flight": "search_flights", "get_order": "cancel_order", "cancel_order": "get_order",
}


# --- Faults -----------------------------------------------------------------------------------

FAULT_NAMES = ("wrong_tool", "wrong_argument", "missing_call", "slow_answer_seconds")


@dataclass(frozen=True)
class Faults:
    wrong_tool: bool = False
    wrong_argument: bool = False
    missing_call: bool = False
    slow_answer_seconds: float = 0.0
    rate: float = 1.0

    def any(self) -> bool:
        return self.wrong_tool or self.wrong_argument or self.missing_call or self.slow_answer_seconds > 0


def parse_faults(value: Any) -> Faults:
    """Faults from a dict, a list of names, or "name,name"; raises ValueError on unknown
    names or bad values."""
    if value in (None, "", [], {}):
        return Faults()
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        value = {name: True for name in value}
    if not isinstance(value, dict):
        raise ValueError("faults must be an object, a list of names, or a comma-separated string")
    unknown = sorted(set(value) - {*FAULT_NAMES, "rate"})
    if unknown:
        raise ValueError(f"unknown fault(s): {', '.join(unknown)} (known: {', '.join(FAULT_NAMES)}, rate)")
    try:
        rate = float(value.get("rate", 1.0))
        slow = value.get("slow_answer_seconds", 0.0)
        slow = 1.0 if slow is True else float(slow or 0.0)
    except (TypeError, ValueError):
        raise ValueError("rate and slow_answer_seconds must be numbers") from None
    if not 0.0 <= rate <= 1.0 or not 0.0 <= slow <= 300.0:
        raise ValueError("rate must be within 0..1 and slow_answer_seconds within 0..300")
    return Faults(
        wrong_tool=bool(value.get("wrong_tool")),
        wrong_argument=bool(value.get("wrong_argument")),
        missing_call=bool(value.get("missing_call")),
        slow_answer_seconds=slow,
        rate=rate,
    )


def fault_applies(eval_id: str, rate: float) -> bool:
    """Whether a case is among the `rate` share that misbehaves; fixed per eval_id."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    fraction = int(hashlib.sha256(eval_id.encode()).hexdigest()[:8], 16) / 2**32
    return fraction < rate


_CITY_SWAP = {"Tokyo": "Osaka", "Paris": "Lyon", "Rome": "Milan", "Oslo": "Bergen"}
_AIRPORT_SWAP = {"BER": "HAM", "MAD": "BCN", "LIS": "OPO", "FCO": "CIA"}


def _wrong_value(key: str, value: Any) -> Any:
    if key == "city":
        return _CITY_SWAP.get(value, "Springfield")
    if key in ("origin", "destination"):
        return _AIRPORT_SWAP.get(value, "XXX")
    if key == "date":
        return (dt.date.fromisoformat(value) + dt.timedelta(days=1)).isoformat()
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str) and re.search(r"\d+$", value):
        number = re.search(r"\d+$", value)
        assert number is not None
        return value[: number.start()] + str(int(number.group()) + 1)
    if isinstance(value, str):
        return " ".join(reversed(value.split())) if " " in value else value + "x"
    return None


def _apply_faults(calls: list[tuple[str, dict[str, Any]]], faults: Faults) -> list[tuple[str, dict[str, Any]]]:
    calls = [(name, dict(args)) for name, args in calls]
    if faults.missing_call and calls:
        calls.pop()
    if faults.wrong_tool and calls:
        calls[0] = (WRONG_TOOL[calls[0][0]], calls[0][1])
    if faults.wrong_argument and calls and calls[0][1]:
        args = calls[0][1]
        key = next(iter(args))
        args[key] = _wrong_value(key, args[key])
    return calls


# --- Understanding a turn ---------------------------------------------------------------------

_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_FLIGHT = re.compile(r"\b[A-Z0-9]{2} \d{2,4}\b")
_ORDER = re.compile(r"\border\s+#?(\d+)", re.IGNORECASE)
_PASSENGER = re.compile(r"\bfor ([A-Z][\w'-]+(?: [A-Z][\w'-]+)*)")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        bits = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                bits.append(part["text"])
            elif isinstance(part, dict) and "json" in part:
                bits.append(json.dumps(part["json"], sort_keys=True))
        return "\n".join(bits)
    return "" if content is None else json.dumps(content, sort_keys=True)


def _first_city(text: str) -> str | None:
    cities = _cities(text)
    return cities[0] if cities else None


def _cities(text: str) -> list[str]:
    found = [(m.start(), city) for city in WEATHER for m in re.finditer(rf"\b{city}\b", text)]
    return [city for _, city in sorted(found)]


def _last(history: list[dict[str, Any]], pattern: re.Pattern[str] | Callable[[str], Any]) -> Any:
    """The first match of `pattern` in the history, newest message first."""
    for message in reversed(history):
        text = _text(message.get("content"))
        found = pattern.search(text) if isinstance(pattern, re.Pattern) else pattern(text)
        if found:
            return found
    return None


@dataclass
class _Plan:
    intent: str
    calls: list[tuple[str, dict[str, Any]]]
    detail: dict[str, Any]


def _plan(message: str, history: list[dict[str, Any]]) -> _Plan:
    lower = message.lower()
    cities = _cities(message)
    if "umbrella" in lower:
        return _Plan("umbrella", [], {})
    if "cancel" in lower:
        order = _ORDER.search(message) or _last(history, _ORDER)
        if order is None:
            return _Plan("ask_order", [], {})
        return _Plan("cancel_order", [("cancel_order", {"order_id": order.group(1), "reason": "customer request"})], {})
    if "order" in lower:
        order = _ORDER.search(message)
        if order is None:
            return _Plan("ask_order", [], {})
        return _Plan("get_order", [("get_order", {"order_id": order.group(1)})], {})
    if re.search(r"\bbook\b", lower):
        flight = _FLIGHT.search(message) or _last(history, _FLIGHT)
        passenger = _PASSENGER.search(message)
        if flight is None or passenger is None:
            return _Plan("ask_booking", [], {})
        return _Plan("book", [("book_flight", {"flight": flight.group(), "passenger": passenger.group(1)})], {})
    if "flight" in lower:
        date = _DATE.search(message)
        if len(cities) < 2 or date is None:
            return _Plan("ask_route", [], {})
        args = {"origin": AIRPORTS[cities[0]], "destination": AIRPORTS[cities[1]], "date": date.group()}
        cheapest = "cheapest" in lower or "find" in lower
        return _Plan("flights", [("search_flights", args)], {"cheapest": cheapest})
    if "tomorrow" in lower or "forecast" in lower:
        city = cities[0] if cities else _last(history, _first_city)
        if city is None:
            return _Plan("ask_city", [], {})
        return _Plan("forecast", [("get_forecast", {"city": city, "days": 1})], {})
    if "weather" in lower or "warmer" in lower or "colder" in lower:
        if not cities:
            city = _last(history, _first_city)
            cities = [city] if city else []
        if not cities:
            return _Plan("ask_city", [], {})
        calls = [("get_weather", {"city": city}) for city in cities]
        return _Plan("compare" if len(cities) > 1 else "weather", calls, {"colder": "colder" in lower})
    if re.search(r"\b(hi|hello|hey|help)\b|what can you do", lower):
        return _Plan("capabilities", [], {})
    return _Plan("unknown", [], {})


def _answer(plan: _Plan, results: list[tuple[str, dict[str, Any]]], history: list[dict[str, Any]]) -> str:
    ok = {name: [r for n, r in results if n == name and "error" not in r] for name in TOOLS}
    errors = [r["error"] for _, r in results if "error" in r]
    if plan.intent == "capabilities":
        return CAPABILITIES
    if plan.intent == "unknown":
        return CANNOT_HELP
    if plan.intent.startswith("ask_"):
        return {
            "ask_order": "Which order do you mean? Please give me its number.",
            "ask_booking": "Which flight, and for whom? Search for a flight first.",
            "ask_route": "Where from, where to, and on which date (YYYY-MM-DD)?",
            "ask_city": "Which city do you mean?",
        }[plan.intent]
    if plan.intent == "umbrella":
        return _umbrella(history)
    if plan.intent == "weather" and ok["get_weather"]:
        w = ok["get_weather"][0]
        return f"It is {w['temp_c']}°C and {w['condition']} in {w['city']}."
    if plan.intent == "compare" and len(ok["get_weather"]) >= 2:
        a, b = sorted(ok["get_weather"][:2], key=lambda w: w["temp_c"], reverse=not plan.detail["colder"])
        word = "colder" if plan.detail["colder"] else "warmer"
        return f"{a['city']} is {word}: {a['temp_c']}°C against {b['temp_c']}°C in {b['city']}."
    if plan.intent == "compare" and ok["get_weather"]:
        w = ok["get_weather"][0]
        return f"I only found the weather for {w['city']}: {w['temp_c']}°C and {w['condition']}."
    if plan.intent == "forecast" and ok["get_forecast"]:
        f = ok["get_forecast"][0]
        when = "Tomorrow" if f["days"] == 1 else f"In {f['days']} days"
        return f"{when} {f['city']} will be {f['temp_c']}°C with {f['condition']}."
    if plan.intent == "flights" and ok["search_flights"]:
        args = plan.calls[0][1]
        flights = ok["search_flights"][0]["flights"]
        if not flights:
            return f"I found no flights from {args['origin']} to {args['destination']} on {args['date']}."
        if plan.detail["cheapest"]:
            f = min(flights, key=lambda f: f["price_eur"])
            return (f"The cheapest flight from {args['origin']} to {args['destination']} on {args['date']} is "
                    f"{f['flight']} at {f['departs']} for {f['price_eur']} EUR.")
        return " ".join(
            f"{f['flight']} leaves {args['origin']} at {f['departs']} and arrives {args['destination']} at "
            f"{f['arrives']} for {f['price_eur']} EUR." for f in flights
        )
    if plan.intent == "book" and ok["book_flight"]:
        b = ok["book_flight"][0]
        return f"Booked {b['flight']} for {b['passenger']}; confirmation code {b['confirmation']}."
    if plan.intent == "get_order" and ok["get_order"]:
        o = ok["get_order"][0]
        if o["status"] == "shipped":
            return f"Order {o['order_id']} shipped on {o['shipped_on']} and arrives on {o['arrives_on']}."
        return f"Order {o['order_id']} holds {o['items']}, not yet shipped."
    if plan.intent == "cancel_order" and ok["cancel_order"]:
        c = ok["cancel_order"][0]
        return f"Order {c['order_id']} is cancelled; the refund of {c['refund_eur']:.2f} EUR takes 3-5 days."
    if errors:
        return f"Sorry, I could not do that: {errors[0]}."
    return "Sorry, I could not look that up."


_FORECAST_SAID = re.compile(r"^(Tomorrow|In \d+ days) (\w+) will be -?\d+°C with ([^.]+)\.")
_WEATHER_SAID = re.compile(r"^It is -?\d+°C and ([^.]+) in (\w+)\.")


def _umbrella(history: list[dict[str, Any]]) -> str:
    for message in reversed(history):
        if message.get("role") != "assistant":
            continue
        text = _text(message.get("content"))
        forecast = _FORECAST_SAID.search(text)
        weather = _WEATHER_SAID.search(text)
        if forecast:
            condition, when = forecast.group(3), forecast.group(1).lower()
        elif weather:
            condition, when = weather.group(1), "now"
        else:
            continue
        if re.search(r"rain|drizzl|shower|storm", condition):
            return f"Yes, bring an umbrella: {condition} is expected {when}."
        return f"No umbrella needed: {condition} is expected {when}."
    return "Tell me the city first, and I will check the forecast."


def _words(text: str) -> int:
    return len(text.split())


# --- The turn ---------------------------------------------------------------------------------


def respond(request: dict[str, Any],
            call_tool: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Answer one turn: a `TurnRequest` dict in, a `TurnReply` dict out. `call_tool(name, args)`
    runs each tool (default: straight from TOOLS); an instrumented caller wraps it in a span
    (docs/recipes/otel_agent.py)."""
    turn = TurnRequest.model_validate(request)
    faults = parse_faults(turn.metadata.get("faults"))
    if not fault_applies(turn.eval_id, faults.rate):
        faults = Faults()
    history = [m.model_dump() for m in turn.history]
    message = _text(turn.user_content)
    plan = _plan(message, history)
    calls = _apply_faults(plan.calls, faults)
    run_tool = call_tool or (lambda name, args: TOOLS[name](args))
    results = [(name, run_tool(name, args)) for name, args in calls]
    answer = _answer(plan, results, history)
    if faults.slow_answer_seconds:
        time.sleep(faults.slow_answer_seconds)
    prompt_words = 40 + _words(message) + sum(_words(_text(m["content"])) for m in history)
    return {
        "final_response": answer,
        "tool_calls": [
            {"name": name, "args": args, "call_id": f"call_{turn.turn_index + 1}_{n + 1}", "result": result,
             **({"error": result["error"]} if "error" in result else {})}
            for n, ((name, args), (_, result)) in enumerate(zip(calls, results, strict=True))
        ],
        "trajectory": [
            {"step_type": "NODE", "name": "router", "metadata": {"intent": plan.intent}},
            *({"step_type": "TOOL", "name": name, "args": args} for name, args in calls),
            {"step_type": "NODE", "name": "responder"},
        ],
        "usage": {"prompt_tokens": prompt_words * 4 // 3,
                  "completion_tokens": _words(answer) * 4 // 3 + 12 * len(calls)},
        "metadata": {"agent": "evalsite demo travel agent", "faulty": faults.any()},
    }
