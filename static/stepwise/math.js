// Draws the math the server marked (labeling/mathtext.py): each
// <span class="math" data-display="0|1"> holds escaped TeX, which KaTeX renders in place.
// katex.render builds DOM nodes and sets styles through the CSSOM, which the page's
// Content-Security-Policy allows (style attributes in HTML it would refuse).
//
// Math arrives with the page, with htmx swaps (the preview of a written step) and with
// workbench.js replacing #steps after each rating, so every added node is looked at.
(function () {
  "use strict";
  const SELECTOR = ".math[data-display]:not([data-rendered])";
  // Commands MATH text uses that KaTeX lacks, in terms of ones it has.
  const macros = { "\\mbox": "\\text{#1}" };

  // KaTeX sizes the SVG of a tall delimiter with setAttribute("style", ...), which the CSP
  // refuses; while it renders, that one call goes through the CSSOM instead, which it allows.
  const setAttribute = Element.prototype.setAttribute;
  function viaCssom(name, value) {
    if (name === "style") this.style.cssText = value;
    else setAttribute.call(this, name, value);
  }

  function draw(span) {
    const tex = span.textContent;
    Element.prototype.setAttribute = viaCssom;
    try {
      window.katex.render(tex, span, {
        displayMode: span.dataset.display === "1",
        throwOnError: false, // a typo shows as red TeX, never a broken page
        strict: "ignore",
        trust: false,
        macros: { ...macros }, // a copy: \gdef in one span must not leak into the next
      });
    } finally {
      Element.prototype.setAttribute = setAttribute;
    }
    span.dataset.rendered = "1";
    span.title = tex; // the TeX as typed, for a labeler checking a symbol
  }

  function renderWithin(root) {
    if (!window.katex || !root.querySelectorAll) return;
    if (root.matches && root.matches(SELECTOR)) draw(root);
    root.querySelectorAll(SELECTOR).forEach(draw);
  }

  function start() {
    renderWithin(document.body);
    new MutationObserver((records) => {
      for (const record of records) record.addedNodes.forEach(renderWithin);
    }).observe(document.body, { childList: true, subtree: true });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
