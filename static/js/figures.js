// Draws the plotly figures of a page from their JSON data blocks
// (<script type="application/json" class="plotly-figure" data-target="ID">, written by
// evaluations.charts.to_html): the Content-Security-Policy allows no inline script, so the
// figures are data and this file draws them, on load and in content htmx swaps in.
(function () {
  "use strict";
  function draw(root) {
    if (!window.Plotly || !root.querySelectorAll) return;
    root.querySelectorAll("script.plotly-figure").forEach(function (block) {
      if (block.dataset.drawn) return;
      var target = document.getElementById(block.dataset.target);
      if (!target) return;
      block.dataset.drawn = "1";
      var figure = JSON.parse(block.textContent);
      window.Plotly.newPlot(target, figure.data, figure.layout, figure.config);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { draw(document); });
  } else {
    draw(document);
  }
  document.addEventListener("htmx:load", function (event) { draw(event.detail.elt || document); });
})();
