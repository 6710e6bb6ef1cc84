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
  // On a narrow screen the header's menu folds behind a "Menu" button (shown by this script
  // only: without JavaScript the menu simply stays open).
  function foldMenu() {
    var toggle = document.querySelector(".nav-toggle");
    var header = document.querySelector(".site-header");
    if (!toggle || !header) return;
    toggle.hidden = false;
    header.classList.add("js-fold");
    toggle.addEventListener("click", function () {
      var open = header.classList.toggle("menu-open");
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", foldMenu);
  } else {
    foldMenu();
  }
  // An <input data-select-on-focus> selects its text when focused (a new API token, to copy);
  // here rather than in an inline handler, which the Content-Security-Policy refuses.
  document.addEventListener("focusin", function (event) {
    var target = event.target;
    if (target instanceof HTMLInputElement && target.hasAttribute("data-select-on-focus")) {
      target.select();
    }
  });
})();
