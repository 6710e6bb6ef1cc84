// Small behaviours shared by every page. Each one only enhances a plain form or link,
// so the page still works with JavaScript off.
(function () {
  "use strict";
  // A <select data-autosubmit> submits its form when changed (the project switcher).
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target instanceof HTMLSelectElement && target.hasAttribute("data-autosubmit")) {
      target.form.requestSubmit ? target.form.requestSubmit() : target.form.submit();
    }
  });
  // An <input data-select-on-focus> selects its text when focused (a new API token, to copy);
  // here rather than in an inline handler, which the Content-Security-Policy refuses.
  document.addEventListener("focusin", function (event) {
    var target = event.target;
    if (target instanceof HTMLInputElement && target.hasAttribute("data-select-on-focus")) {
      target.select();
    }
  });
})();
