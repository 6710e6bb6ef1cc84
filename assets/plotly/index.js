// The plotly.js bundle evalsite serves: the core and only the trace types its charts use
// (evaluations/web/charts/*: go.Scatter, go.Bar, go.Heatmap), registered the documented
// modular way. Built by build.mjs into static/vendor/plotly-evalsite-<hash>.min.js.
var Plotly = require("plotly.js/lib/core");

Plotly.register([
  require("plotly.js/lib/scatter"),
  require("plotly.js/lib/bar"),
  require("plotly.js/lib/heatmap"),
]);

module.exports = Plotly;
