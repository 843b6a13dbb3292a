// The answer-review page's keys (templates/labeling/answer_review.html): e equal, n not equal,
// s skip. Each presses the control that carries the key in data-key, so the page works the
// same without this script. One press per page: the next answer comes with the next page.
(function () {
  "use strict";
  let pressed = false;

  function typing(target) {
    return target instanceof HTMLElement &&
      (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const control = document.querySelector(`.answer-review [data-key="${CSS.escape(event.key)}"]`);
    if (!control) return;
    event.preventDefault();
    if (pressed) return;
    pressed = true;
    control.click();
  });
})();
