// The rule and channel forms show the fields their kind uses (all of them without JS).
(function () {
  "use strict";
  var RULE = {
    run_finished: ["condition", "pass_rate_below", "evalset", "branch", "model"],
    monitor: ["monitor_id", "criterion", "threshold", "window_minutes", "min_count"],
    digest: ["period"],
    triage_assigned: [],
    mention: []
  };
  var CHANNEL = { webhook: ["url"], slack: ["url"], email: ["emails"], inapp: [] };
  var ALWAYS = ["name", "kind", "enabled", "channels", "cooldown_minutes"];

  function update(form) {
    var kind = form.querySelector("[name=kind]");
    if (!kind) { return; }
    var table = RULE[kind.value] !== undefined ? RULE : CHANNEL;
    var shown = ALWAYS.concat(table[kind.value] || []);
    var fields = form.querySelectorAll("[data-field]");
    for (var i = 0; i < fields.length; i++) {
      var name = fields[i].getAttribute("data-field");
      fields[i].hidden = shown.indexOf(name) < 0;
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var forms = document.querySelectorAll("[data-kind-form]");
    for (var i = 0; i < forms.length; i++) {
      (function (form) {
        update(form);
        form.addEventListener("change", function (event) {
          if (event.target && event.target.name === "kind") { update(form); }
        });
      })(forms[i]);
    }
  });
})();
