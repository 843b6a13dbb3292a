// Keyboard-first labeling. Keys act on the active item: a step, or an alternative completion
// of the step rated -1 (the current one, or an earlier item chosen with Backspace/k). They
// never fire while a text field has focus.
(function () {
  "use strict";
  // New step buttons must answer keys at once; htmx's default settle delay would drop a
  // fast second keypress.
  if (window.htmx) window.htmx.config.defaultSettleDelay = 0;
  const ratingKeys = { "1": "-1", "-": "-1", "2": "0", "0": "0", "3": "1", "+": "1", "=": "1" };

  // Document order: each step, then the alternatives nested under it.
  function items() { return Array.from(document.querySelectorAll("#steps li[data-item]")); }
  function active() { return document.querySelector("#steps li[data-active]") || items().at(-1); }
  function activate(li) {
    items().forEach((s) => s.removeAttribute("data-active"));
    if (li) { li.setAttribute("data-active", ""); li.scrollIntoView({ block: "nearest" }); }
  }
  function typing(target) {
    return target.closest("input[type=text], textarea, select, [contenteditable]") !== null;
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const li = active();
    if (event.key in ratingKeys && li) {
      li.querySelector(`:scope > .rate button[data-rating="${ratingKeys[event.key]}"]`).click();
    } else if (event.key === "u" && li) {
      const box = li.querySelector(":scope > .rate input[name=flagged]");
      box.checked = !box.checked;
    } else if ((event.key === "Backspace" || event.key === "k") && li) {
      const all = items();
      const previous = all[all.indexOf(li) - 1];
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
