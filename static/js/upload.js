// Drag-and-drop for the upload form. The file input underneath is a normal
// <input type=file multiple>: without this script the form works the same way.
(function () {
  "use strict";
  function formatSize(bytes) {
    if (bytes < 1024) return bytes + " B";
    if (bytes < 1024 * 1024) return (bytes / 1024).toFixed(1) + " KB";
    return (bytes / 1024 / 1024).toFixed(1) + " MB";
  }

  function setup(zone) {
    var input = zone.querySelector("input[type=file]");
    var list = zone.querySelector("[data-dropzone-files]");
    if (!input) return;
    zone.classList.add("dropzone-ready");

    function showFiles() {
      list.textContent = "";
      Array.prototype.forEach.call(input.files, function (file) {
        var item = document.createElement("li");
        item.textContent = file.name + " · " + formatSize(file.size); // textContent: names are not HTML
        list.appendChild(item);
      });
    }

    ["dragenter", "dragover"].forEach(function (name) {
      zone.addEventListener(name, function (event) {
        event.preventDefault();
        zone.classList.add("dropzone-over");
      });
    });
    ["dragleave", "drop"].forEach(function (name) {
      zone.addEventListener(name, function (event) {
        event.preventDefault();
        if (name === "dragleave" && zone.contains(event.relatedTarget)) return;
        zone.classList.remove("dropzone-over");
      });
    });
    zone.addEventListener("drop", function (event) {
      if (!event.dataTransfer || !event.dataTransfer.files.length) return;
      input.files = event.dataTransfer.files;
      showFiles();
    });
    input.addEventListener("change", showFiles);
    showFiles(); // files chosen before this script ran (or restored by the browser) show too
  }

  function setupAll() {
    document.querySelectorAll("[data-dropzone]").forEach(setup);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setupAll);
  } else {
    setupAll();
  }
})();
