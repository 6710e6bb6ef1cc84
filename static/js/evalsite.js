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
  // On a narrow screen the header's menu is folded behind a "Menu" button (by the CSS, from the
  // first paint; without JavaScript static/css/nojs.css leaves it open and hides the button).
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest(".nav-toggle");
    var header = toggle && toggle.closest(".site-header");
    if (!header) return;
    var open = header.classList.toggle("menu-open");
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  });
  // A box that scrolls sideways (a wide table on a phone, a chart, a long line of code) takes
  // the keyboard focus, so it can be scrolled with the arrow keys (WCAG 2.1.1); checked again
  // when the width changes and in content htmx swaps in.
  var SCROLLERS = ".table-scroll, main .table, .chart, pre, .scroll-x";
  function focusScrollers(root) {
    if (!root.querySelectorAll) return;
    // Every box measured first, then the attributes written: a write between two reads would
    // make the browser lay the page out again for each box.
    var boxes = Array.prototype.slice.call(root.querySelectorAll(SCROLLERS));
    var scrolling = boxes.map(function (box) {
      return box.scrollWidth > box.clientWidth + 1 && /auto|scroll/.test(getComputedStyle(box).overflowX);
    });
    boxes.forEach(function (box, i) {
      var scrolls = scrolling[i];
      if (scrolls && !box.hasAttribute("tabindex")) {
        box.setAttribute("tabindex", "0");
        box.dataset.scrollFocus = "1";
      } else if (!scrolls && box.dataset.scrollFocus) {
        box.removeAttribute("tabindex");
        delete box.dataset.scrollFocus;
      }
    });
  }
  // After the load, when the page's layout is already done: measuring the boxes earlier forced
  // the whole first layout inside this script's task (a long task on a slow phone).
  if (document.readyState === "complete") {
    focusScrollers(document);
  } else {
    window.addEventListener("load", function () { setTimeout(function () { focusScrollers(document); }, 0); });
  }
  document.addEventListener("htmx:load", function (event) { focusScrollers(event.detail.elt || document); });
  document.addEventListener("evalsite:drawn", function () { focusScrollers(document); });
  var resized = null;
  window.addEventListener("resize", function () {
    clearTimeout(resized);
    resized = setTimeout(function () { focusScrollers(document); }, 200);
  });
  // An <input data-select-on-focus> selects its text when focused (a new API token, to copy);
  // here rather than in an inline handler, which the Content-Security-Policy refuses.
  document.addEventListener("focusin", function (event) {
    var target = event.target;
    if (target instanceof HTMLInputElement && target.hasAttribute("data-select-on-focus")) {
      target.select();
    }
  });
  // A <button data-copy="ID"> copies the value of the input #ID (a new API token): shown by
  // this script only. The Clipboard API where the page is a secure context (HTTPS, or
  // 127.0.0.1), else the selection and execCommand("copy"), which needs neither; no network.
  function copyButtons() {
    document.querySelectorAll("button[data-copy]").forEach(function (button) {
      var input = document.getElementById(button.getAttribute("data-copy"));
      var status = document.getElementById(button.getAttribute("data-copy-status"));
      if (!(input instanceof HTMLInputElement)) return;
      button.hidden = false;
      button.addEventListener("click", function () {
        function done(ok) {
          if (status) status.textContent = ok ? "Copied." : "Press Ctrl+C (⌘C) to copy: the token is selected.";
          button.textContent = ok ? "Copied" : "Copy";
        }
        input.focus();
        input.select();
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(input.value).then(function () { done(true); }, function () {
            done(document.execCommand && document.execCommand("copy"));
          });
        } else {
          done(document.execCommand && document.execCommand("copy"));
        }
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", copyButtons);
  } else {
    copyButtons();
  }
  // A shortened eval id's copy button (<button data-copy-text>) puts the whole id on the clipboard.
  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element ? event.target.closest("button[data-copy-text]") : null;
    if (!button) return;
    var text = button.getAttribute("data-copy-text");
    function copied() { button.classList.add("copied"); button.setAttribute("aria-label", "Copied"); }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(copied);
      return;
    }
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    if (document.execCommand("copy")) copied();
    document.body.removeChild(area);
  });
})();
