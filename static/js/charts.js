// Plotly figures take the page's text and grid colours (light or dark, from the CSS
// variables): static/js/figures.js puts them in each figure before drawing it, and this
// file restyles the figures already drawn when the system switches between the two.
(function () {
  "use strict";
  function restyle() {
    if (!window.Plotly) return;
    var css = getComputedStyle(document.documentElement);
    var text = css.getPropertyValue("--fg-muted").trim() || "#6e7781";
    var grid = css.getPropertyValue("--border-muted").trim() || "rgba(128,128,128,.22)";
    document.querySelectorAll(".js-plotly-plot").forEach(function (plot) {
      var update = { "font.color": text };
      Object.keys(plot.layout || {}).forEach(function (key) {
        if (/^[xy]axis\d*$/.test(key)) {
          update[key + ".gridcolor"] = grid;
          update[key + ".zerolinecolor"] = grid;
          update[key + ".linecolor"] = grid;
        }
      });
      (plot.layout.annotations || []).forEach(function (_, i) {
        update["annotations[" + i + "].font.color"] = text;
      });
      window.Plotly.relayout(plot, update);
    });
  }
  if (window.matchMedia) {
    var query = window.matchMedia("(prefers-color-scheme: dark)");
    if (query.addEventListener) query.addEventListener("change", restyle);
  }
})();
