// Keyboard-first labeling. Keys act on the active step (the current one, or an earlier one
// chosen with Backspace/k) and never fire while a text field has focus.
(function () {
  "use strict";
  // New step buttons must answer keys at once; htmx's default settle delay would drop a
  // fast second keypress.
  if (window.htmx) window.htmx.config.defaultSettleDelay = 0;
  const ratingKeys = { "1": "-1", "-": "-1", "2": "0", "0": "0", "3": "1", "+": "1", "=": "1" };

  function steps() { return Array.from(document.querySelectorAll("#steps li.step")); }
  function active() { return document.querySelector("#steps li[data-active]") || steps().at(-1); }
  function activate(li) {
    steps().forEach((s) => s.removeAttribute("data-active"));
    if (li) { li.setAttribute("data-active", ""); li.scrollIntoView({ block: "nearest" }); }
  }
  function typing(target) {
    return target.closest("input[type=text], textarea, select, [contenteditable]") !== null;
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const li = active();
    if (event.key in ratingKeys && li) {
      li.querySelector(`button[data-rating="${ratingKeys[event.key]}"]`).click();
    } else if (event.key === "u" && li) {
      const box = li.querySelector("input[name=flagged]");
      box.checked = !box.checked;
    } else if ((event.key === "Backspace" || event.key === "k") && li) {
      const previous = li.previousElementSibling;
      if (previous) activate(previous);
    } else if (event.key === "Enter") {
      const submit = document.getElementById("submit-session");
      if (submit) submit.click(); else return;
    } else if (event.key === "?") {
      const dialog = document.getElementById("keymap");
      if (dialog.open) dialog.close(); else dialog.showModal();
    } else {
      return;
    }
    event.preventDefault();
  });

  document.addEventListener("click", (event) => {
    if (event.target.matches("[data-keymap-toggle]")) {
      event.preventDefault();
      document.getElementById("keymap").showModal();
    }
  });
  document.addEventListener("htmx:responseError", (event) => {
    // A refused rating (e.g. the session ended in another tab) is shown, not swallowed.
    window.alert(event.detail.xhr.responseText);
  });
})();
