"""Text contrast in real Chromium: every visible piece of text on the reviewer's pages (home,
runs, a run, a comparison, a drill-down, the trend, the review queue, the activity feed) has
at least 4.5:1 contrast against the background it is drawn on, at 1440 and 390 px wide, in
the light and the dark colour scheme. The background is found by walking up the element's
ancestors and laying their background colours (and opacities) over one another, so a badge
on a tinted row is checked against the tint, not against white."""

from __future__ import annotations

import os
from typing import Any

import pytest

from evaluations.models import CaseResult, Project
from evaluations.review.triage import triage_update
from tests.compare_helpers import import_demo, make_run, perfect_outputs, regressed_outputs

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM calls made while playwright runs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MINIMUM = 4.5

# For each element with text of its own: its colour and the background under it, composed
# from its ancestors' background colours and opacities; the text's contrast ratio (WCAG 2).
CONTRASTS = r"""
() => {
  const parse = (c) => {
    const m = c.match(/rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)/);
    if (!m) return null;
    return [+m[1], +m[2], +m[3], m[4] === undefined ? 1 : +m[4]];
  };
  const over = (top, bottom) => {  // top (with alpha) laid over an opaque bottom
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]);
  };
  const luminance = (c) => {
    const [r, g, b] = c.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [l1, l2] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (l1 + 0.05) / (l2 + 0.05);
  };
  const canvas = parse(getComputedStyle(document.documentElement).backgroundColor);
  const pageBackground = canvas && canvas[3] > 0 ? canvas
    : (matchMedia("(prefers-color-scheme: dark)").matches ? [18, 18, 18, 1] : [255, 255, 255, 1]);
  const background = (el) => {
    const layers = [];
    let opacity = 1;
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const style = getComputedStyle(node);
      opacity *= parseFloat(style.opacity);
      const bg = parse(style.backgroundColor);
      if (bg && bg[3] > 0) layers.push(bg);
      if (bg && bg[3] >= 1) break;
    }
    let colour = pageBackground;
    for (const layer of layers.reverse()) colour = over(layer, colour);
    return [colour, opacity];
  };
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest("svg, script, style, template, noscript, option, [hidden], [aria-hidden=true]")) continue;
    const own = Array.from(el.childNodes).filter(n => n.nodeType === 3).map(n => n.textContent.trim()).join(" ");
    if (!own) continue;
    if (!el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) continue;
    const box = el.getBoundingClientRect();
    if (box.width <= 1 || box.height <= 1) continue;  // visually hidden text, for screen readers
    const style = getComputedStyle(el);
    const [bg, opacity] = background(el);
    const fg = parse(style.color);
    const text = over([fg[0], fg[1], fg[2], fg[3] * opacity], bg);
    const shown = bg;
    out.push({text: own.slice(0, 40), tag: el.tagName.toLowerCase() + (el.className ? "." + String(el.className).split(" ").join(".") : ""),
              ratio: Math.round(ratio(text, shown) * 100) / 100, fg: style.color, bg: "rgb(" + bg.slice(0, 3).map(Math.round).join(",") + ")"});
  }
  return out;
}
"""


def _pages(acme: Project, alice: Any) -> dict[str, str]:
    version = import_demo(acme)
    labels = {"branch": "main", "model": "gpt-x"}
    baseline = make_run(acme, version, perfect_outputs(), name="nightly", labels=labels)
    candidate = make_run(acme, version, regressed_outputs(), name="nightly", labels=labels)
    triage_update(
        project=acme,
        evalset=version.evalset,
        eval_id="weather_tokyo",
        baseline=baseline,
        candidate=candidate,
        actor=alice,
        status="confirmed",
    )
    tokyo = CaseResult.objects.get(run=candidate, case__eval_id="order_status")
    return {
        "home": "/",
        "runs": "/runs/",
        "run": f"/runs/{candidate.pk}/",
        "compare": f"/compare/?baseline={baseline.pk}&candidate={candidate.pk}",
        "drill-down": f"/runs/{candidate.pk}/cases/{tokyo.pk}/?baseline={baseline.pk}",
        "trend": f"/evalsets/{version.evalset_id}/trend/",
        "review queue": "/review/?tab=untriaged",
        "assigned": "/review/?tab=assigned",
        "activity": f"/projects/{acme.slug}/activity/",
    }


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_visible_text_has_4_5_to_1_contrast(
    chromium: Any, live_server: Any, alice: Any, acme: Project, scheme: str
) -> None:
    pages = _pages(acme, alice)
    failures: list[str] = []
    checked = 0
    for width, height in ((1440, 900), (390, 844)):
        context = chromium.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
        context.set_default_timeout(15_000)
        page = context.new_page()
        page.goto(live_server.url + "/accounts/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "alice-pass-123")
        page.click("button[type=submit]")
        page.wait_for_url(live_server.url + "/")
        for name, path in pages.items():
            page.goto(live_server.url + path)
            page.wait_for_load_state("networkidle")
            found = page.evaluate(CONTRASTS)
            assert found, f"{name}: no text found"
            checked += len(found)
            failures += [
                f"{name} @{width}: {f['ratio']}:1 {f['tag']} {f['text']!r} ({f['fg']} on {f['bg']})"
                for f in found
                if f["ratio"] < MINIMUM
            ]
        context.close()
    assert checked > 500
    assert failures == [], "\n".join(sorted(set(failures)))
