// Keyboard-first labeling. Keys act on the active item: a step, or an alternative completion
// of the step rated -1 (the next one to rate, or an earlier item chosen with Backspace/k).
// They never fire while a text field has focus.
//
// The page applies no labeling rule. Each answer of the server carries what the labeler may
// do next (#next-actions, from core.rules.next_actions): which item the keys rate now,
// which items may be rated and why the others may not, where Backspace goes, and where the
// keys go after each rating. The page acts on that answer.
//
// Labelers type faster than the network answers. So presses queue, in order, and each is
// carried out in its turn, once every rating before it is answered: a rating key rates the
// item the latest answer says the keys rate (or the one chosen with Backspace/k, or the one
// clicked), if that answer says it may be rated. The ratings go to the server one at a time,
// each naming its item and a sequence number, and each answer re-renders the steps. While
// presses wait, the page shows where they will land by following the answer's `then`. What
// the page marks chosen is always what is stored; a press that cannot be applied is said so
// in #rating-status, never dropped without a word.
//
// #rating-status is the page's one live region: it says what changed (a rating stored, the
// next item), never the whole list again. Focus stays on the active step across every swap
// (the swapped-out button took it away with it), and a session that ended elsewhere (a lapsed
// lease, another tab) is said so in the page, with a way on to the next solution.
(function () {
  "use strict";
  // The submission swaps in the next solution; keys must answer at once after it.
  if (window.htmx) window.htmx.config.defaultSettleDelay = 0;

  // Presses not yet carried out, oldest first: {kind: "rate", rating, item?}, {kind:
  // "unsure", item?}, {kind: "back"} or {kind: "submit"}. `item` only where the labeler named
  // it (a click); otherwise the press goes where the keys act in its turn.
  const queue = [];
  let inflight = null; // the rating on its way: {item, step, completion, rating, flagged, seq}
  let seq = 0; // numbers the ratings this page sends
  let sending = false;
  let submitting = false; // from Enter until the next solution is in: keys would rate the old one
  let cursor = null; // the item chosen with Backspace/k; null: where the answer says keys act
  let marks = new Map(); // unsure ticked on an item not rated yet: item key -> flag
  let closed = false; // the session ended elsewhere: keys no longer rate
  let releasing = false; // the page itself presses the submit button (its turn in the queue)

  function section() { return document.getElementById("steps"); }
  function say(text) {
    const status = document.getElementById("rating-status");
    if (status) status.textContent = text;
  }

  // The latest answer's next actions, with its items by key (read once per answer).
  let read = { from: null, actions: null };
  function actions() {
    const script = section()?.querySelector("#next-actions");
    if (!script) return null;
    if (read.from !== script) {
      const next = JSON.parse(script.textContent);
      next.byKey = new Map(next.items.map((item) => [item.key, item]));
      read = { from: script, actions: next };
    }
    return read.actions;
  }
  function item(itemKey) { return itemKey ? actions()?.byKey.get(itemKey) || null : null; }

  // Which key gives which rating (the server's list: the page holds no rating of its own).
  function ratingKeys() { return JSON.parse(section()?.dataset.ratingKeys || "{}"); }

  // A rated item's stored rating and flag, as the latest answer rendered it.
  function stored(itemKey) {
    const rate = section()?.querySelector(`li[data-item="${itemKey}"] > .rate[data-rated]`);
    return rate ? { rating: Number(rate.dataset.rated), flagged: rate.dataset.flagged === "1" } : null;
  }
  function flagOf(itemKey) {
    const before = stored(itemKey);
    return before ? before.flagged : marks.get(itemKey) === true;
  }

  // The item keys act on now, by the latest answer.
  function aim() {
    if (cursor !== null && item(cursor)?.open) return cursor;
    return actions()?.active || null;
  }

  // Where the keys will act once the presses still waiting are carried out, and what those
  // presses will show on the way (rating and flag per item): the answer's `then` and `back`
  // followed, for display only. Each press is aimed again in its turn (`carryOut`).
  function ahead() {
    let at = aim();
    const pending = new Map();
    const flags = new Map();
    const flag = (key) => (flags.has(key) ? flags.get(key) : flagOf(key));
    for (const entry of inflight ? [inflight, ...queue] : queue) {
      const key = entry.item || at;
      if (entry.kind === "submit") break;
      if (entry.kind === "back") {
        at = item(at)?.back || at;
      } else if (entry.kind === "unsure" && key) {
        flags.set(key, !flag(key));
      } else if (key) {
        pending.set(key, entry.rating);
        flags.set(key, entry === inflight ? entry.flagged : flag(key));
        // null: after this rating no item is active (a -1 that ends the label).
        const then = item(key)?.then[String(entry.rating)];
        at = then === undefined ? at : then;
      }
    }
    return { at, pending, flags };
  }

  function parse(itemKey) {
    const [, step, completion] = itemKey.match(/^s(\d+)(?:c(\d+))?$/);
    return { step: Number(step), completion: Number(completion || 0) };
  }

  function describe(itemKey) {
    const { step, completion } = parse(itemKey);
    return completion ? `Alternative ${completion} of step ${step + 1}` : `Step ${step + 1}`;
  }

  function press(entry) {
    queue.push(entry);
    render();
    pump();
  }

  // A press in its turn: the rating to send, or null (carried out here, or refused).
  function carryOut(entry) {
    if (entry.kind === "back") {
      // From nowhere (a -1 ended the label): back to the last item shown, that -1.
      const back = aim() ? item(aim())?.back : actions()?.last;
      if (back) cursor = back;
      return null;
    }
    const itemKey = entry.item || aim();
    const target = item(itemKey);
    if (!target || !target.open) {
      refuse(target ? target.reason : actions()?.active_reason || "Nothing to rate now.");
      return null;
    }
    const before = stored(itemKey);
    if (entry.kind === "unsure") {
      // Saved at once on a rated item; on one not rated yet it goes with its rating.
      if (!before) {
        marks.set(itemKey, !(marks.get(itemKey) === true));
        return null;
      }
      return { item: itemKey, step: target.step, completion: target.completion,
               rating: before.rating, flagged: !before.flagged };
    }
    const flagged = flagOf(itemKey);
    marks.delete(itemKey);
    cursor = null;
    return { item: itemKey, step: target.step, completion: target.completion,
             rating: entry.rating, flagged };
  }

  // A press the latest answer does not allow: said, with the answer's reason; the presses
  // typed after it assumed it, so they are not carried out either.
  function refuse(reason) {
    const later = queue.length;
    queue.length = 0;
    submitting = false;
    let text = `Not rated: ${reason}`;
    if (later) text += ` ${later} later key press${later === 1 ? " was" : "es were"} not sent.`;
    say(text);
  }

  // Show the queue on the page: the active item, pending ratings, unsure boxes.
  function render() {
    const steps = section();
    if (!steps) return;
    const view = ahead();
    steps.querySelectorAll("li[data-item]").forEach((li) => {
      const itemKey = li.dataset.item;
      if (itemKey === view.at) {
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
      const pending = view.pending.get(itemKey);
      li.querySelectorAll(":scope > .rate > button[data-rating]").forEach((button) => {
        button.classList.toggle("pending", pending !== undefined && Number(button.dataset.rating) === pending);
      });
      const box = li.querySelector(":scope > .rate input[name=flagged]");
      box.checked = view.flags.has(itemKey) ? view.flags.get(itemKey) : flagOf(itemKey);
    });
    const waiting = (inflight ? 1 : 0) + queue.filter((p) => p.kind === "rate").length;
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
  function news(sent) {
    let text = `${describe(sent.item)} rated ${ratingText(sent.rating)}${sent.flagged ? ", unsure" : ""}.`;
    const next = ahead().at;
    if (document.getElementById("submit-session")) text += " Ready to submit (Enter).";
    else if (next && next !== sent.item) text += ` Now ${describe(next).toLowerCase()} of ${section().dataset.totalSteps}.`;
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

  // Carry out the queue's presses in order, one rating on its way at a time; each answer
  // replaces #steps.
  async function pump() {
    if (sending) return;
    sending = true;
    try {
      while (queue.length && !closed) {
        const entry = queue.shift();
        if (entry.kind === "submit") {
          submitNow(true);
          continue;
        }
        const sent = carryOut(entry);
        if (!sent) {
          render();
          continue;
        }
        seq += 1;
        inflight = { kind: "rate", ...sent, seq };
        render();
        const body = new URLSearchParams({
          step_index: sent.step, completion_index: sent.completion, rating: sent.rating, seq,
        });
        if (sent.flagged) body.set("flagged", "1");
        let response, text;
        try {
          response = await fetch(section().dataset.rateUrl, {
            method: "POST", body, credentials: "same-origin",
            headers: { "X-CSRFToken": csrfToken(), "HX-Request": "true" },
          });
          text = await response.text();
        } catch (error) {
          response = null;
          text = `The rating could not be sent (${error.message}).`;
        }
        if (!response || !response.ok) {
          failed(sent, text);
          continue;
        }
        // Swap in the answer and take its rating off the way in one step: a key pressed in
        // between would otherwise count that rating twice, or not at all.
        const template = document.createElement("template");
        template.innerHTML = text.trim();
        const fresh = template.content.querySelector("#steps");
        if (response.redirected || !fresh) {
          failed(sent, "The answer was not the steps (signed out?): reload the page.");
          continue;
        }
        section().replaceWith(fresh);
        inflight = null;
        if (window.htmx) window.htmx.process(fresh);
        render();
        keepFocus();
        if (!queue.some((p) => p.kind !== "submit")) say(news(sent));
      }
    } finally {
      sending = false;
      render();
    }
  }

  // A refused rating is shown with the server's reason; the presses typed after it aimed at
  // items that assumed it, so they are not sent, and the page says how many.
  function failed(sent, reason) {
    const later = queue.length;
    inflight = null;
    queue.length = 0;
    cursor = null;
    submitting = false;
    let text = `${describe(sent.item)} ${ratingText(sent.rating)} not saved: ${reason}`;
    if (later) text += ` ${later} later key press${later === 1 ? " was" : "es were"} not sent.`;
    render();
    say(text);
    checkOpen(reason);
  }

  // Text typed in the box for one's own step and not saved: a submit would drop it.
  function unsavedOwnStep() {
    const box = document.getElementById("human-completion");
    return box !== null && box.value.trim() !== box.defaultValue.trim();
  }
  const UNSAVED = "Not submitted: your own step is not saved. Ctrl+Enter in its box saves it; " +
    "empty the box to submit without it.";

  // Enter: submit now, or once the ratings on their way are answered.
  function submitNow(queued) {
    const button = document.getElementById("submit-session");
    if (button && unsavedOwnStep()) {
      say(UNSAVED);
      return false;
    }
    submitting = button !== null;
    if (button) {
      releasing = true;
      try {
        button.click();
      } finally {
        releasing = false;
      }
    } else if (queued) {
      say(`Not submitted: ${actions()?.submit_refusal || "the solution is not finished."}`);
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
        // Out of the box once saved, so that Enter submits the session rather than typing a
        // new line (the swap would otherwise give the new box the focus back).
        event.target.blur();
        own.requestSubmit(document.getElementById("human-completion-save"));
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (closed) return; // the notice's link is the way on
    const keys = ratingKeys();
    const ratingKey = Object.hasOwn(keys, event.key) ? keys[event.key] : undefined;
    const known = ratingKey !== undefined || ["u", "Backspace", "k", "Enter"].includes(event.key);
    if (known && submitting) {
      say("Submitting: wait for the next solution.");
      event.preventDefault();
      return;
    }
    const steps = section();
    if (ratingKey !== undefined && steps) {
      press({ kind: "rate", rating: ratingKey });
    } else if (event.key === "u" && steps) {
      press({ kind: "unsure" });
    } else if ((event.key === "Backspace" || event.key === "k") && steps) {
      press({ kind: "back" });
    } else if (event.key === "Enter") {
      if (inflight || queue.length) {
        submitting = true;
        queue.push({ kind: "submit" });
      } else {
        // On a button or a link Enter keeps pressing it when there is nothing to submit;
        // anywhere else the labeler is told why nothing was submitted.
        const pressing = event.target.closest("button, a[href], summary") !== null;
        if (!submitNow(!pressing)) {
          if (!pressing) event.preventDefault();
          return;
        }
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
    const submitButton = event.target.closest && event.target.closest("#submit-session");
    if (submitButton && unsavedOwnStep()) {
      event.preventDefault();
      say(UNSAVED);
      return;
    }
    if (submitButton && !releasing && (inflight || queue.length || submitting)) {
      // A click, like Enter, waits its turn: the form on the page still holds the outcome
      // before the ratings on their way (a -1 clicked just before ends the label there).
      event.preventDefault();
      if (!submitting) {
        submitting = true;
        queue.push({ kind: "submit" });
        render();
      }
      return;
    }
    if (event.target.matches("[data-keymap-toggle]")) {
      event.preventDefault();
      document.getElementById("keymap").showModal();
      return;
    }
    const button = event.target.closest("#steps li[data-item] > .rate > button[data-rating]");
    if (button && !submitting) {
      const itemKey = button.closest("li[data-item]").dataset.item;
      press({ kind: "rate", rating: Number(button.dataset.rating), item: itemKey });
    }
  });
  document.addEventListener("change", (event) => {
    const box = event.target.closest("#steps li[data-item] > .rate input[name=flagged]");
    if (box) press({ kind: "unsure", item: box.closest("li[data-item]").dataset.item });
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
      inflight = null;
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
