// The compare page and the case drill-down. Each behaviour only adds to plain links:
// - a click on a point of a chart inside [data-click-open] opens the URL the point carries
//   in customdata[0] (the case drill-down);
// - on the drill-down, j and k follow the "next" and "previous" links of the comparison walk.
(function () {
  "use strict";

  function bindCharts() {
    document.querySelectorAll("[data-click-open] .js-plotly-plot").forEach(function (plot) {
      if (plot.dataset.clickBound || typeof plot.on !== "function") return;
      plot.dataset.clickBound = "1";
      plot.on("plotly_click", function (event) {
        var point = event && event.points && event.points[0];
        var url = point && point.customdata && point.customdata[0];
        // Only same-site paths: the URLs are built by the server, but never follow anything else.
        if (typeof url === "string" && url.charAt(0) === "/" && url.charAt(1) !== "/") {
          window.location.href = url;
        }
      });
    });
  }

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) return;
    var which = { j: "next", k: "prev" }[event.key];
    if (!which) return;
    var link = document.querySelector('a[data-walk="' + which + '"]');
    if (link) {
      event.preventDefault();
      link.click();
    }
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", bindCharts);
  } else {
    bindCharts();
  }
  // Charts are drawn when they come into view (static/js/figures.js), and a history
  // restore may redraw them.
  document.addEventListener("evalsite:drawn", bindCharts);
  document.addEventListener("htmx:afterSettle", bindCharts);
  window.addEventListener("load", bindCharts);
})();
