// Phase-1 live labeling. Every press (a rating, a choice, a written step) becomes a request
// that names its step and proposal the moment it is made; the requests go to the server one
// at a time, in order, and each answer replaces #live-steps. A press typed ahead of the
// network is aimed at the proposal the page will show next once the presses still on their
// way are applied, so nothing is dropped and nothing is applied twice (the server stores a
// repeated request once). Keys never fire while a text field has focus.
(function () {
  "use strict";
  const queue = [];
  // Presses made while the next step's proposals are still on their way (a choice or a
  // written step is being sent, or the generator is at work): applied once they are shown.
  const held = [];
  let sending = false;
  let pick = null; // the proposal Enter continues from (j/k move it)

  function section() { return document.getElementById("live-steps"); }
  // Which key gives which rating: the server's list (data-rating-keys), not one of the page's.
  function ratingOf(key) {
    const keys = JSON.parse(section()?.dataset.ratingKeys || "{}");
    return Object.hasOwn(keys, key) ? keys[key] : undefined;
  }
  function say(text) {
    const status = document.getElementById("rating-status");
    if (status) status.textContent = text;
  }
  function csrfToken() {
    return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
  }

  // Stored ratings of the current step, with the presses still queued applied.
  function predicted() {
    const steps = section();
    const ratings = new Map();
    if (!steps) return { step: null, ratings, count: 0 };
    steps.querySelectorAll(".proposals > li[data-completion]").forEach((li) => {
      const c = Number(li.dataset.completion);
      ratings.set(c, li.dataset.rated === undefined ? null : Number(li.dataset.rated));
    });
    const step = steps.dataset.step === undefined ? null : Number(steps.dataset.step);
    queue.forEach((p) => { if (p.kind === "rate" && p.step === step) ratings.set(p.completion, p.rating); });
    return { step, ratings, count: ratings.size };
  }

  function send() {
    if (sending || !queue.length) return;
    sending = true;
    const press = queue[0];
    const steps = section();
    const body = new URLSearchParams({ step_index: String(press.step) });
    if (press.completion !== undefined) body.set("completion_index", String(press.completion));
    if (press.rating !== undefined) body.set("rating", String(press.rating));
    if (press.flagged) body.set("flagged", "1");
    if (press.text !== undefined) body.set("text", press.text);
    if (press.finish) body.set("finish_reason", press.finish);
    fetch(steps.dataset[press.kind + "Url"], {
      method: "POST",
      headers: { "X-CSRFToken": csrfToken(), "HX-Request": "true" },
      body,
    }).then(async (response) => {
      const html = await response.text();
      queue.shift();
      if (!response.ok) {
        say(html.replace(/<[^>]*>/g, " ").trim().slice(0, 300) || "That was refused.");
        queue.length = 0; // later presses were aimed at a state that did not come
        held.length = 0;
        return;
      }
      swap(html);
      say(press.done || "Saved.");
    }).catch(() => {
      queue.length = 0;
      held.length = 0;
      say("The network failed: nothing more was sent. Press again.");
    }).finally(() => { sending = false; send(); release(); });
  }

  function swap(html) {
    const doc = new DOMParser().parseFromString(html, "text/html");
    const steps = doc.getElementById("live-steps");
    const bench = doc.getElementById("workbench");
    if (steps && !bench) {
      // A step being written survives the swap of an answer that came back meanwhile: its
      // text, and the focus and caret even while it is still empty, or the next keys typed
      // would land on the page and rate proposals.
      const box = document.getElementById("human-completion");
      const draft = box ? { step: section().dataset.step, text: box.value,
                            focused: document.activeElement === box,
                            start: box.selectionStart, end: box.selectionEnd } : null;
      section().replaceWith(steps);
      const next = document.getElementById("human-completion");
      if (draft && next && steps.dataset.step === draft.step) {
        next.value = draft.text;
        if (draft.focused) {
          next.focus();
          next.setSelectionRange(draft.start, draft.end);
        }
      }
      if (window.htmx) window.htmx.process(steps);
    } else if (bench) {
      // The session ended: the next one (or "nothing to label") takes the page.
      document.getElementById("workbench").replaceWith(bench);
      if (window.htmx) window.htmx.process(bench);
      if (bench.dataset.session) history.pushState({}, "", `/label/${bench.dataset.session}/`);
    } else {
      document.querySelector("main").innerHTML = doc.body.innerHTML;
    }
    pick = null;
  }

  function awaiting() {
    const steps = section();
    return !!steps && (steps.dataset.status === "pending"
      || queue.some((p) => p.kind === "choose" || p.kind === "write" || p.kind === "retry"));
  }

  function hold(press) {
    held.push(press);
    say(`${held.length} key${held.length === 1 ? "" : "s"} held until the proposals arrive.`);
  }

  // After each swap: presses held for the proposals now shown are applied, in order.
  function release() {
    const steps = section();
    if (!held.length || awaiting()) return;
    if (!steps || steps.dataset.status !== "ready" || !predicted().count) {
      held.length = 0; // the step failed or the solution ended: they were aimed at nothing
      return;
    }
    held.splice(0).forEach((press) => (press.kind === "rate" ? rate(press.rating) : choose()));
  }

  function rate(rating, completion) {
    if (completion === undefined && awaiting()) { hold({ kind: "rate", rating }); return; }
    const state = predicted();
    if (state.step === null || !state.count) { say("No proposals to rate yet."); return; }
    if (completion === undefined) {
      completion = [...state.ratings.keys()].find((c) => state.ratings.get(c) === null);
      if (completion === undefined) { say("Every proposal is rated: choose one (Enter) or change one by clicking."); return; }
    }
    const li = section().querySelector(`.proposals > li[data-completion="${completion}"]`);
    const flagged = !!(li && li.querySelector("input[name=flagged]:checked"));
    queue.push({ kind: "rate", step: state.step, completion, rating, flagged,
                 done: `Proposal ${completion + 1} rated ${rating > 0 ? "+1" : rating}.` });
    send();
  }

  function choices(state) {
    return [...state.ratings.keys()].filter((c) => state.ratings.get(c) === 0 || state.ratings.get(c) === 1);
  }

  function choose(completion) {
    if (completion === undefined && awaiting()) { hold({ kind: "choose" }); return; }
    const state = predicted();
    if ([...state.ratings.values()].includes(null)) { say("Rate every proposal first."); return; }
    if (completion === undefined) {
      const options = choices(state);
      const best = options.find((c) => state.ratings.get(c) === 1);
      completion = pick !== null && options.includes(pick) ? pick : (best !== undefined ? best : options[0]);
    }
    if (completion === undefined) { say("No proposal is rated +1 or 0: write your own step (w)."); return; }
    queue.push({ kind: "choose", step: state.step, completion, done: `Continued from proposal ${completion + 1}.` });
    send();
  }

  // The poll of a pending step swaps the section in when its proposals are ready.
  document.addEventListener("htmx:afterSwap", () => release());

  document.addEventListener("click", (event) => {
    if (event.target.matches("[data-keymap-toggle]")) {
      event.preventDefault();
      document.getElementById("keymap").showModal();
      return;
    }
    const steps = section();
    if (!steps || !steps.contains(event.target)) return;
    const button = event.target.closest("button");
    if (!button) return;
    const state = predicted();
    if (button.dataset.rating !== undefined) {
      rate(Number(button.dataset.rating), Number(button.closest(".rate").dataset.completion));
    } else if (button.dataset.choose !== undefined) {
      choose(Number(button.dataset.choose));
    } else if (button.dataset.retry !== undefined) {
      queue.push({ kind: "retry", step: state.step, done: "Asking the generator again…" });
      send();
    } else if (button.dataset.stop !== undefined) {
      held.length = 0; // presses held for these proposals are aimed at nothing now
      queue.push({ kind: "stop", step: state.step, done: "Stopped waiting: try again, or give up below." });
      send();
    } else if (button.dataset.finish) {
      queue.push({ kind: "finish", step: state.step, finish: button.dataset.finish, done: "Submitted." });
      send();
    }
  });

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form.id !== "live-write-form") return;
    event.preventDefault();
    const text = form.querySelector("textarea").value;
    if (!text.trim()) { say("Write the step first."); return; }
    queue.push({ kind: "write", step: Number(form.dataset.step), text, done: "Your step is saved." });
    send();
  });

  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (target.matches && target.matches("textarea")) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        target.form.requestSubmit();
      } else if (event.key === "Escape") target.blur();
      return;
    }
    if (target.matches && target.matches("input, select")) return;
    if (event.ctrlKey || event.metaKey || event.altKey || !section()) return;
    const rating = ratingOf(event.key);
    if (rating !== undefined) {
      event.preventDefault();
      rate(rating);
    } else if (event.key === "Enter") {
      event.preventDefault();
      choose();
    } else if (event.key === "j" || event.key === "k") {
      const options = choices(predicted());
      if (!options.length) return;
      const at = options.indexOf(pick);
      pick = options[(at + (event.key === "j" ? 1 : options.length - 1)) % options.length];
      section().querySelectorAll(".proposals > li").forEach((li) => {
        li.classList.toggle("current", Number(li.dataset.completion) === pick);
      });
      say(`Enter continues from proposal ${pick + 1}.`);
    } else if (event.key === "u") {
      const state = predicted();
      const next = [...state.ratings.keys()].find((c) => state.ratings.get(c) === null);
      const box = next === undefined ? null
        : section().querySelector(`.proposals > li[data-completion="${next}"] input[name=flagged]`);
      if (box) { box.checked = !box.checked; say(`Proposal ${next + 1} ${box.checked ? "marked" : "not"} unsure.`); }
    } else if (event.key === "w") {
      const box = document.getElementById("human-completion");
      if (box) { event.preventDefault(); box.focus(); }
    } else if (event.key === "?") {
      const dialog = document.getElementById("keymap");
      if (dialog) dialog.open ? dialog.close() : dialog.showModal();
    }
  });
})();
