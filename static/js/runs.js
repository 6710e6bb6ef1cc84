// Run pages: the compare picker of the runs list and the New run form. Each behaviour only
// enhances a plain form, so both still work with JavaScript off.
(function () {
  "use strict";

  // Runs list: "Compare" is enabled once two runs are ticked; "Compare N runs" for three to eight.
  function updateCompare(form) {
    var ticked = form.querySelectorAll('input[name="run"]:checked').length;
    var button = form.querySelector("[data-compare-button]");
    var hint = form.querySelector("[data-compare-hint]");
    if (!button) return;
    button.disabled = ticked < 2 || ticked > 8;
    button.textContent = ticked > 2 ? "Compare " + ticked + " runs" : "Compare";
    if (hint) {
      hint.textContent = ticked === 2 ? "Ready: the older run is the baseline."
        : ticked > 8 ? "Tick at most eight runs."
        : ticked > 2 ? "Ready: side by side, the oldest is the reference."
        : "Tick two runs to compare them (the older is the baseline), or up to eight side by side.";
    }
  }
  function initCompare(root) {
    root.querySelectorAll("[data-compare-form]").forEach(updateCompare);
  }
  document.addEventListener("change", function (event) {
    var form = event.target.closest && event.target.closest("[data-compare-form]");
    if (form) updateCompare(form);
  });

  // New run: show the settings of the chosen config source and target only.
  function showChosen(form) {
    form.querySelectorAll("[data-show-when]").forEach(function (block) {
      var parts = block.getAttribute("data-show-when").split("=");
      var chosen = form.querySelector('input[name="' + parts[0] + '"]:checked');
      block.hidden = !chosen || chosen.value !== parts[1];
    });
  }
  function initRunForm(form) {
    var select = form.querySelector("[data-version-select]");
    var editor = form.querySelector("[data-config-editor]");
    // The editor follows the chosen version's default config until someone edits it.
    var pristine = editor ? editor.value : "";
    if (select && editor) {
      select.addEventListener("change", function () {
        var option = select.options[select.selectedIndex];
        if (editor.value === pristine && option) {
          editor.value = option.getAttribute("data-default-config") || "";
          pristine = editor.value;
        }
      });
    }
    // The outputs skeleton link follows the chosen version.
    var skeleton = form.querySelector("[data-skeleton-link]");
    if (select && skeleton) {
      select.addEventListener("change", function () {
        var option = select.options[select.selectedIndex];
        if (option) { skeleton.setAttribute("href", option.getAttribute("data-skeleton-url") || ""); }
      });
    }
    form.addEventListener("change", function () { showChosen(form); });
    showChosen(form);
    // DeepEval's judged metrics: "Add" puts the criterion, with DeepEval's defaults, in the config.
    form.addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest("[data-add-criterion]");
      if (!button || !editor) return;
      var config;
      try { config = JSON.parse(editor.value || "{}"); } catch (e) { config = null; }
      if (!config || typeof config !== "object") {
        button.textContent = "Fix the JSON first";
        return;
      }
      config.criteria = config.criteria || {};
      var name = button.getAttribute("data-add-criterion");
      var key = name, n = 2;
      while (Object.prototype.hasOwnProperty.call(config.criteria, key)) { key = name + "_" + n; n += 1; }
      var entry = JSON.parse(button.getAttribute("data-snippet"));
      if (key !== name) { entry.evaluator = name; }
      config.criteria[key] = entry;
      editor.value = JSON.stringify(config, null, 2);
      button.textContent = "Added";
    });
  }

  function init() {
    initCompare(document);
    document.querySelectorAll("[data-run-form]").forEach(initRunForm);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
  // The runs table is swapped by htmx when filters change.
  document.addEventListener("htmx:afterSwap", function (event) { initCompare(event.target.parentNode || document); });
})();
