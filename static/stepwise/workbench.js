// Keyboard-first labeling. Keys act on the active item: a step, or an alternative completion
// of the step rated -1 (the next one to rate, or an earlier item chosen with Backspace/k).
// They never fire while a text field has focus.
//
// Labelers type faster than the network answers. So a press becomes (item, rating) the
// moment it is made, aimed at the item the page will show as active once the ratings still
// on their way are applied (the same rules as the server's session_state); the ratings then
// go to the server one at a time, in order, each naming its item and a sequence number, and
// each answer re-renders the steps. What the page marks chosen is always what is stored; a
// press that cannot be applied is said so in #rating-status, never dropped without a word.
//
// #rating-status is the page's one live region: it says what changed (a rating stored, the
// next item), never the whole list again. Focus stays on the active step across every swap
// (the swapped-out button took it away with it), and a session that ended elsewhere (a lapsed
// lease, another tab) is said so in the page, with a way on to the next solution.
(function () {
  "use strict";
  // The submission swaps in the next solution; keys must answer at once after it.
  if (window.htmx) window.htmx.config.defaultSettleDelay = 0;
  const ratingKeys = { "1": -1, "-": -1, "2": 0, "0": 0, "3": 1, "+": 1, "=": 1 };

  const queue = []; // presses not yet answered, oldest (the one on its way) first
  let seq = 0; // numbers the ratings this page sends
  let sending = false;
  let submitting = false; // from Enter until the next solution is in: keys would rate the old one
  let cursor = null; // the item chosen with Backspace/k; null: the next item to rate
  let marks = new Map(); // unsure ticked on an item not rated yet: item key -> flag
  let closed = false; // the session ended elsewhere: keys no longer rate

  function key(step, completion) { return completion ? `s${step}c${completion}` : `s${step}`; }
  function section() { return document.getElementById("steps"); }
  function say(text) {
    const status = document.getElementById("rating-status");
    if (status) status.textContent = text;
  }

  // The session as the server last rendered it: every rated item with its rating and flag.
  function storedState(steps) {
    const ratings = new Map();
    steps.querySelectorAll("li[data-item] > .rate[data-rated]").forEach((rate) => {
      const step = Number(rate.dataset.step);
      const completion = Number(rate.dataset.completion);
      ratings.set(key(step, completion), {
        step, completion, rating: Number(rate.dataset.rated), flagged: rate.dataset.flagged === "1",
      });
    });
    return {
      ratings,
      total: Number(steps.dataset.totalSteps),
      offered: JSON.parse(steps.dataset.alternatives || "{}"),
    };
  }

  // What the server will do with one rating (labeling/services/workbench.py, rate_step).
  function apply(state, press) {
    const before = state.ratings.get(key(press.step, 0));
    state.ratings.set(press.key, {
      step: press.step, completion: press.completion, rating: press.rating, flagged: press.flagged,
    });
    if (press.completion) return;
    for (const [k, r] of state.ratings) {
      if (press.rating === -1 && r.step > press.step) {
        state.ratings.delete(k); // labels stop at the first error
      } else if (press.rating !== -1 && before && before.rating === -1 &&
                 r.step === press.step && r.completion > 0) {
        state.ratings.delete(k); // alternatives are rated only in place of a wrong step
      }
    }
  }

  // The state once every rating still on its way is applied.
  function predicted() {
    const state = storedState(section());
    queue.forEach((press) => { if (!press.submit) apply(state, press); });
    return state;
  }

  // The items shown, in document order, and the next one to rate (the server's session_state).
  function layout(state) {
    const own = [...state.ratings.values()].filter((r) => r.completion === 0);
    const errors = own.filter((r) => r.rating === -1).map((r) => r.step);
    const error = errors.length ? Math.min(...errors) : null;
    const rated = own.length;
    const items = [];
    let current = null;
    const shown = error === null ? Math.min(rated + 1, state.total) : rated;
    for (let step = 0; step < shown; step++) {
      items.push(key(step, 0));
      if (step !== error) continue;
      const offered = Number(state.offered[String(step)] || 0);
      const done = [...state.ratings.values()].filter((r) => r.step === step && r.completion).length;
      for (let k = 1; k <= Math.min(done + 1, offered); k++) items.push(key(step, k));
      if (done < offered) current = key(step, done + 1);
    }
    if (error === null && rated < state.total) current = key(rated, 0);
    return { items, current };
  }

  // The item keys act on now, in the page as it will be once the queue is applied.
  function target(state) {
    const view = layout(state);
    if (cursor !== null && view.items.includes(cursor)) return cursor;
    return view.current || view.items.at(-1) || null;
  }

  function parse(itemKey) {
    const [, step, completion] = itemKey.match(/^s(\d+)(?:c(\d+))?$/);
    return { step: Number(step), completion: Number(completion || 0) };
  }

  function enqueue(itemKey, rating, flagged) {
    seq += 1;
    queue.push({ key: itemKey, ...parse(itemKey), rating, flagged, seq });
    render();
    pump();
  }

  function rate(itemKey, rating) {
    const state = predicted();
    if (!layout(state).items.includes(itemKey)) {
      say(`${describe(itemKey)} is no longer open: an earlier step is rated -1.`);
      return;
    }
    const rated = state.ratings.get(itemKey);
    const flagged = rated ? rated.flagged : marks.get(itemKey) === true;
    marks.delete(itemKey);
    cursor = null;
    enqueue(itemKey, rating, flagged);
  }

  // Unsure is saved at once on a rated item; on one not rated yet it goes with its rating.
  function toggleUnsure(itemKey) {
    const state = predicted();
    const rated = state.ratings.get(itemKey);
    if (rated) {
      enqueue(itemKey, rated.rating, !rated.flagged);
    } else {
      marks.set(itemKey, !(marks.get(itemKey) === true));
      render();
    }
  }

  function describe(itemKey) {
    const { step, completion } = parse(itemKey);
    return completion ? `Alternative ${completion} of step ${step + 1}` : `Step ${step + 1}`;
  }

  // Show the queue on the page: the active item, pending ratings, unsure boxes.
  function render() {
    const steps = section();
    if (!steps) return;
    const state = predicted();
    const active = target(state);
    steps.querySelectorAll("li[data-item]").forEach((li) => {
      const itemKey = li.dataset.item;
      if (itemKey === active) {
        if (!li.hasAttribute("data-active")) {
          li.setAttribute("data-active", "");
          li.scrollIntoView({ block: "nearest" });
        }
        li.setAttribute("aria-current", "step");
        li.tabIndex = -1;
      } else {
        li.removeAttribute("data-active");
        li.removeAttribute("aria-current");
        li.removeAttribute("tabindex");
      }
      const pending = queue.filter((p) => p.key === itemKey && !p.submit).at(-1);
      li.querySelectorAll(":scope > .rate > button[data-rating]").forEach((button) => {
        button.classList.toggle("pending", !!pending && Number(button.dataset.rating) === pending.rating);
      });
      const box = li.querySelector(":scope > .rate input[name=flagged]");
      const rated = state.ratings.get(itemKey);
      box.checked = rated ? rated.flagged : marks.get(itemKey) === true;
    });
    const waiting = queue.filter((p) => !p.submit).length;
    steps.dataset.waiting = String(waiting);
    if (waiting) say(`Saving ${waiting} rating${waiting === 1 ? "" : "s"}…`);
    else if (document.getElementById("rating-status")?.textContent.startsWith("Saving")) say("");
  }

  // Focus back where the labeler works when a swap took it away: the active step (its
  // buttons are a Tab away), or the submit button once every item is rated. Never a rating
  // button itself, where Enter would rate rather than submit.
  function keepFocus() {
    const focused = document.activeElement;
    if (focused && focused !== document.body && focused.isConnected) return;
    const steps = section();
    if (!steps) return;
    const place = steps.querySelector("li[data-active]") || document.getElementById("submit-session") ||
      steps;
    if (place === steps) steps.tabIndex = -1;
    place.focus({ preventScroll: true });
  }

  function ratingText(rating) { return rating > 0 ? "+1" : String(rating); }

  // What a stored rating changed, for the live region: the rating, then what comes next.
  function news(press) {
    let text = `${describe(press.key)} rated ${ratingText(press.rating)}${press.flagged ? ", unsure" : ""}.`;
    const next = target(predicted());
    if (document.getElementById("submit-session")) text += " Ready to submit (Enter).";
    else if (next && next !== press.key) text += ` Now ${describe(next).toLowerCase()} of ${section().dataset.totalSteps}.`;
    return text;
  }

  // After a refusal: is the session itself over (lease lapsed, finished in another tab)? The
  // renew endpoint answers 204 only for an open session of this labeler.
  async function checkOpen(reason) {
    const workbench = document.getElementById("workbench");
    if (!workbench || !workbench.dataset.renewUrl) return;
    let open = true;
    try {
      const response = await fetch(workbench.dataset.renewUrl, {
        method: "POST", credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken(), "HX-Request": "true" },
      });
      open = response.status === 204;
    } catch (error) {
      return; // offline: the status line already says the rating was not saved
    }
    if (!open) showClosed(reason);
  }

  function showClosed(reason) {
    const notice = document.getElementById("session-notice");
    if (!notice) return;
    closed = true;
    queue.length = 0;
    document.getElementById("session-notice-text").textContent = reason;
    notice.hidden = false;
    const steps = section();
    if (steps) steps.inert = true;
    document.querySelector(".finish-other")?.setAttribute("inert", "");
    notice.querySelector("a").focus();
  }

  function csrfToken() {
    return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
  }

  // Send the queue's ratings one at a time; each answer replaces #steps.
  async function pump() {
    if (sending) return;
    sending = true;
    try {
      while (queue.length) {
        const press = queue[0];
        if (press.submit) {
          queue.shift();
          submitNow(true);
          continue;
        }
        const steps = section();
        const body = new URLSearchParams({
          step_index: press.step, completion_index: press.completion, rating: press.rating,
          seq: press.seq,
        });
        if (press.flagged) body.set("flagged", "1");
        let response, text;
        try {
          response = await fetch(steps.dataset.rateUrl, {
            method: "POST", body, credentials: "same-origin",
            headers: { "X-CSRFToken": csrfToken(), "HX-Request": "true" },
          });
          text = await response.text();
        } catch (error) {
          response = null;
          text = `The rating could not be sent (${error.message}).`;
        }
        if (!response || !response.ok) {
          failed(press, text);
          continue;
        }
        // Swap in the answer and take its rating off the queue in one step: a key pressed in
        // between would otherwise count that rating twice, or not at all.
        const template = document.createElement("template");
        template.innerHTML = text.trim();
        const fresh = template.content.querySelector("#steps");
        if (response.redirected || !fresh) {
          failed(press, "The answer was not the steps (signed out?): reload the page.");
          continue;
        }
        section().replaceWith(fresh);
        queue.shift();
        if (window.htmx) window.htmx.process(fresh);
        render();
        keepFocus();
        if (!queue.some((p) => !p.submit)) say(news(press));
      }
    } finally {
      sending = false;
      render();
    }
  }

  // A refused rating is shown with the server's reason; the presses typed after it aimed at
  // items that assumed it, so they are not sent, and the page says how many.
  function failed(press, reason) {
    const later = queue.length - 1;
    queue.length = 0;
    cursor = null;
    submitting = false;
    let text = `${describe(press.key)} ${ratingText(press.rating)} not saved: ${reason}`;
    if (later) text += ` ${later} later key press${later === 1 ? " was" : "es were"} not sent.`;
    render();
    say(text);
    checkOpen(reason);
  }

  // Enter: submit now, or once the ratings on their way are answered.
  function submitNow(queued) {
    const button = document.getElementById("submit-session");
    submitting = button !== null;
    if (button) {
      button.click();
    } else if (queued) {
      say("Not submitted: the solution is not finished (rate every step, or end at a -1).");
    }
    return submitting;
  }

  document.addEventListener("keydown", (event) => {
    // The form for the labeler's own step answers its own keys: Esc leaves it (the rating
    // keys work again), Ctrl+Enter saves it, Enter on its buttons presses them rather than
    // submitting the session.
    const own = event.target.closest && event.target.closest("form.human-completion");
    if (own) {
      if (event.key === "Escape") {
        event.target.blur();
      } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        own.requestSubmit(document.getElementById("human-completion-save"));
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (closed) return; // the notice's link is the way on
    const known = event.key in ratingKeys || ["u", "Backspace", "k", "Enter"].includes(event.key);
    if (known && submitting) {
      say("Submitting: wait for the next solution.");
      event.preventDefault();
      return;
    }
    const steps = section();
    const state = steps ? predicted() : null;
    const item = state ? target(state) : null;
    if (event.key in ratingKeys && item) {
      rate(item, ratingKeys[event.key]);
    } else if (event.key === "u" && item) {
      toggleUnsure(item);
    } else if ((event.key === "Backspace" || event.key === "k") && item) {
      const items = layout(state).items;
      const previous = items[items.indexOf(item) - 1];
      if (previous) { cursor = previous; render(); }
    } else if (event.key === "Enter") {
      if (queue.length) {
        submitting = true;
        queue.push({ submit: true });
      } else if (!submitNow(false)) {
        return;
      }
    } else if (event.key === "w" && document.getElementById("human-completion")) {
      document.getElementById("human-completion").focus(); // write the correct step yourself
    } else if (event.key === "?") {
      const dialog = document.getElementById("keymap");
      if (dialog.open) dialog.close(); else dialog.showModal();
    } else {
      return;
    }
    event.preventDefault();
  });

  function typing(target) {
    return target.closest("input[type=text], textarea, select, [contenteditable]") !== null;
  }

  document.addEventListener("click", (event) => {
    if (event.target.matches("[data-keymap-toggle]")) {
      event.preventDefault();
      document.getElementById("keymap").showModal();
      return;
    }
    const button = event.target.closest("#steps li[data-item] > .rate > button[data-rating]");
    if (button && !submitting) {
      rate(button.closest("li[data-item]").dataset.item, Number(button.dataset.rating));
    }
  });
  document.addEventListener("change", (event) => {
    const box = event.target.closest("#steps li[data-item] > .rate input[name=flagged]");
    if (box) toggleUnsure(box.closest("li[data-item]").dataset.item);
  });

  let session = document.getElementById("workbench")?.dataset.session;
  document.addEventListener("htmx:afterSwap", () => {
    const now = document.getElementById("workbench")?.dataset.session;
    if (now !== session) {
      // The next solution came in: nothing of the last one's keyboard state carries over.
      session = now;
      submitting = false;
      cursor = null;
      marks = new Map();
      queue.length = 0;
      closed = false;
      render();
      focusWork();
      return;
    }
    render();
    keepFocus();
  });
  document.addEventListener("htmx:responseError", (event) => {
    // A refused submission (e.g. the session ended in another tab) is shown, not swallowed.
    submitting = false;
    const reason = event.detail.xhr.responseText;
    say(reason);
    checkOpen(reason);
  });
  document.addEventListener("htmx:sendError", () => { submitting = false; });

  // A new solution (page load, or swapped in after a submission): start on its active step.
  function focusWork() {
    const active = section()?.querySelector("li[data-active]");
    if (active) active.focus({ preventScroll: true });
  }

  function start() { render(); focusWork(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
