// Draws the plotly figures of a page from their JSON data blocks
// (<script type="application/json" class="plotly-figure" data-target="ID">, written by
// evaluations.web.charts.to_html): the Content-Security-Policy allows no inline script, so
// the figures are data and this file draws them, on load and in content htmx swaps in.
//
// A figure is drawn when it nears the viewport (IntersectionObserver), and plotly.js
// itself (1.2 MB: the longest task a page runs) is fetched, async, only when the first
// figure is: a phone that opens a page whose charts are below the fold never parses it
// before the page is usable, and a page without charts never names it. Its URL comes from
// the <meta name="evalsite-plotly"> that {% plotly_script %} writes on pages with charts.
// Each figure's box already has its height (to_html), so drawing moves nothing else on
// the page. Before printing, every figure is drawn. After drawing, the figure's element
// gets an `evalsite:drawn` event (bubbling), for scripts that bind to the plot.
(function () {
  "use strict";
  var pending = [];     // figures in view, waiting for plotly.js
  var loading = null;   // the <script> fetching plotly.js
  var observer = null;

  // The page's text and grid colours (light or dark, from the CSS variables), put into the
  // figure before it is drawn: one render, no relayout after.
  function themed(layout) {
    var css = getComputedStyle(document.documentElement);
    var text = css.getPropertyValue("--fg-muted").trim();
    var grid = css.getPropertyValue("--border-muted").trim();
    if (!text || !grid) return layout;
    layout.font = layout.font || {};
    layout.font.color = text;
    Object.keys(layout).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        layout[key].gridcolor = grid;
        layout[key].zerolinecolor = grid;
        layout[key].linecolor = grid;
      }
    });
    (layout.annotations || []).forEach(function (note) {
      note.font = note.font || {};
      note.font.color = text;
    });
    return layout;
  }

  // A narrow figure (a phone) with a legend: plotly wraps a horizontal legend one entry a
  // row, and the column it makes takes half the chart. Small type, a short key and entries
  // in columns (two or three a row) keep it to a few lines above the plot; the top margin
  // makes room for those lines and the figure grows by as much, so the plot keeps its height.
  var COMPACT_BELOW = 600;
  var LEGEND_ROW = 18;
  function compact(layout, data, width, target) {
    if (!layout.showlegend || !width || width >= COMPACT_BELOW) return layout;
    var perRow = width < 480 ? 2 : 3;
    var entries = data.filter(function (trace) { return trace.showlegend !== false; }).length;
    var rows = Math.max(1, Math.ceil(entries / perRow));
    var margin = layout.margin || {};
    var top = Math.max(margin.t || 0, 10 + rows * LEGEND_ROW);
    var extra = top - (margin.t || 0);
    layout.margin = Object.assign({}, margin, { t: top });
    if (extra > 0 && layout.height) {
      layout.height += extra;
      target.style.height = layout.height + "px";
    }
    var legend = layout.legend || {};
    legend.orientation = "h";
    legend.font = Object.assign({}, legend.font || {}, { size: 10 });
    legend.itemwidth = 30;
    legend.entrywidthmode = "fraction";
    legend.entrywidth = 1 / perRow;
    legend.tracegroupgap = 0;
    legend.x = 0;
    legend.xanchor = "left";
    legend.y = 1.02;
    legend.yanchor = "bottom";
    layout.legend = legend;
    return layout;
  }

  function drawNow(block) {
    var target = document.getElementById(block.dataset.target);
    if (!target || block.dataset.drawn) return;
    block.dataset.drawn = "1";
    var figure = JSON.parse(block.textContent);
    var layout = compact(themed(figure.layout), figure.data, target.clientWidth, target);
    window.Plotly.newPlot(target, figure.data, layout, figure.config).then(function () {
      target.dispatchEvent(new CustomEvent("evalsite:drawn", { bubbles: true }));
    });
  }

  // One figure per task, so the page answers input between two charts.
  function drain() {
    if (!window.Plotly) return;
    var block = pending.shift();
    if (!block) return;
    drawNow(block);
    if (pending.length) setTimeout(drain, 0);
  }

  function request(block) {
    if (block.dataset.drawn || pending.indexOf(block) >= 0) return;
    pending.push(block);
    if (window.Plotly) {
      if (pending.length === 1) setTimeout(drain, 0);
      return;
    }
    if (loading) return;
    var meta = document.querySelector('meta[name="evalsite-plotly"]');
    if (!meta) return;
    loading = document.createElement("script");
    loading.src = meta.content;
    loading.async = true;
    loading.addEventListener("load", drain);
    document.head.appendChild(loading);
  }

  function watch(root) {
    if (!root.querySelectorAll) return;
    root.querySelectorAll("script.plotly-figure").forEach(function (block) {
      if (block.dataset.drawn || block.dataset.watched) return;
      var target = document.getElementById(block.dataset.target);
      if (!target) return;
      block.dataset.watched = "1";
      if (observer) {
        target.__evalsiteFigure = block;
        observer.observe(target);
      } else {
        request(block);  // no IntersectionObserver: draw them all
      }
    });
  }

  if ("IntersectionObserver" in window) {
    // When it comes within 120 px of the viewport (drawn as the reader scrolls to it): a chart
    // further down (a run's first chart on a phone) does not make the page fetch and run
    // plotly.js while it is still loading.
    observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (!entry.isIntersecting) return;
        observer.unobserve(entry.target);
        request(entry.target.__evalsiteFigure);
      });
    }, { rootMargin: "120px 0px" });
  }

  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("script.plotly-figure").forEach(function (block) {
      if (window.Plotly) drawNow(block); else request(block);
    });
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { watch(document); });
  } else {
    watch(document);
  }
  document.addEventListener("htmx:load", function (event) { watch(event.detail.elt || document); });
})();
