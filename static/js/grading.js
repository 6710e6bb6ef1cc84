// The grading queue's keyboard: j / n next item, k previous, p pass, f fail (each saves the
// grade through the item's own form, posted by htmx, and moves on), 0-9 set the score to
// 0.0-0.9 and = to 1.0, e the note, o opens the drill-down. Without JavaScript the forms post
// as they are.
(function () {
  "use strict";

  var advanceAfter = null; // the position of the item a key graded, to move past once swapped

  function items() {
    return Array.prototype.slice.call(document.querySelectorAll(".grade-queue > .grade-item"));
  }

  function current() {
    return document.querySelector(".grade-queue > .grade-item.is-current");
  }

  function select(item) {
    if (!item) return;
    items().forEach(function (other) { other.classList.remove("is-current"); });
    item.classList.add("is-current");
    item.focus({ preventScroll: true });
    item.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    var all = items();
    var at = all.indexOf(current());
    var next = all[at + step];
    if (next) {
      select(next);
    } else if (at === -1 && all.length) {
      select(all[0]);
    } else {
      var link = document.querySelector('a[data-page="' + (step > 0 ? "next" : "prev") + '"]');
      if (link) link.click();
    }
  }

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  function announce(text) {
    var status = document.getElementById("grade-status");
    if (status) status.textContent = text;
  }

  document.addEventListener("keydown", function (event) {
    if (!document.querySelector(".grade-queue")) return;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var item = current();
    if (typing(event.target)) {
      // Escape leaves a field for the keys again; Enter in the note does the same rather than
      // submitting the form as whichever button comes first.
      var inQueue = event.target.closest && event.target.closest(".grade-queue");
      if (inQueue && item && (event.key === "Escape" || event.key === "Enter")) {
        event.preventDefault();
        item.focus();
      }
      return;
    }
    var key = event.key;
    if (key === "j" || key === "n") { event.preventDefault(); move(1); return; }
    if (key === "k") { event.preventDefault(); move(-1); return; }
    if (!item) {
      if ("pfe=o0123456789".indexOf(key) !== -1 && key.length === 1) { event.preventDefault(); select(items()[0]); }
      return;
    }
    if (key === "p" || key === "f") {
      var button = item.querySelector('button[data-verdict="' + (key === "p" ? "pass" : "fail") + '"]');
      if (button) {
        event.preventDefault();
        advanceAfter = item.dataset.position;
        button.click();
      }
    } else if (/^[0-9]$/.test(key) || key === "=") {
      var score = item.querySelector("input.grade-score");
      if (score) {
        event.preventDefault();
        score.value = key === "=" ? "1" : "0." + key;
        if (key === "0") score.value = "0";
        announce("score " + score.value);
      }
    } else if (key === "e") {
      var note = item.querySelector("input.grade-note");
      if (note) { event.preventDefault(); note.focus(); }
    } else if (key === "o") {
      var open = item.querySelector("a[data-open]");
      if (open) { event.preventDefault(); open.click(); }
    }
  });

  // A click on an item makes it the current one.
  document.addEventListener("click", function (event) {
    var item = event.target.closest && event.target.closest(".grade-queue > .grade-item");
    if (item && !item.classList.contains("is-current")) {
      items().forEach(function (other) { other.classList.remove("is-current"); });
      item.classList.add("is-current");
    }
  });

  // After htmx swapped a graded item back in: keep it current, say what was saved, move on.
  document.addEventListener("htmx:afterSwap", function (event) {
    var swapped = event.detail && (event.detail.target || event.detail.elt);
    var old = swapped && swapped.closest ? swapped.closest(".grade-item") : null;
    var position = old ? old.dataset.position : advanceAfter;
    if (!position) return;
    var item = document.querySelector('.grade-queue > .grade-item[data-position="' + position + '"]');
    if (!item) return;
    var error = item.querySelector('[data-testid="grade-error"]');
    var mine = item.querySelector('[data-testid="my-grade"]');
    announce(error ? error.textContent : (mine ? "saved, " + mine.textContent : "saved"));
    select(item);
    if (!error && advanceAfter === item.dataset.position) move(1);
    advanceAfter = null;
  });

  function start() {
    var all = items();
    if (all.length && !current()) select(all[0]);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
