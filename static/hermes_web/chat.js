/* hermes-web chat page: composer keys, drafts kept per conversation, following the transcript,
   the running state. No inline handlers anywhere (CSP): everything is wired from here. */
(function () {
  "use strict";

  var NEAR_BOTTOM_PX = 120;
  var follow = true;

  function composer() { return document.getElementById("composer"); }
  function box() { return document.getElementById("message"); }

  function draftKey() {
    var form = composer();
    return form ? form.getAttribute("data-draft-key") : null;
  }

  function saveDraft() {
    var key = draftKey(), field = box();
    if (!key || !field) return;
    try {
      if (field.value) { localStorage.setItem(key, field.value); } else { localStorage.removeItem(key); }
    } catch (e) { /* storage full or disabled: the text is still in the box */ }
  }

  function restoreDraft() {
    var key = draftKey(), field = box();
    if (!key || !field || field.value) return;
    try {
      var saved = localStorage.getItem(key);
      if (saved) field.value = saved;
    } catch (e) { /* no storage: nothing to restore */ }
  }

  function nearBottom() {
    var doc = document.documentElement;
    return window.innerHeight + window.scrollY >= doc.scrollHeight - NEAR_BOTTOM_PX;
  }

  function toBottom() { window.scrollTo(0, document.documentElement.scrollHeight); }

  function dedupeMarkers() {
    // A marker can arrive twice (the turn's end and the compaction's end both report it).
    var seen = {};
    document.querySelectorAll("#transcript [id^='msg-']").forEach(function (el) {
      if (seen[el.id]) { el.remove(); } else { seen[el.id] = true; }
    });
  }

  function updateRunningState() {
    var form = composer();
    if (!form) return;
    var running = document.querySelector("#transcript .turn[data-active]") !== null;
    var button = form.querySelector(".send-button");
    var state = form.querySelector(".composer-state");
    form.classList.toggle("running", running);
    if (button) {
      button.classList.toggle("running", running);
      if (running) { button.setAttribute("aria-busy", "true"); } else { button.removeAttribute("aria-busy"); }
    }
    if (state) {
      state.textContent = running
        ? "The agent is answering… what you send now is queued and answered next."
        : "";
    }
  }

  function onKeydown(event) {
    if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) return;
    var form = event.target.form;
    if (!form) return;
    event.preventDefault();
    if (!event.target.value.trim()) return;
    if (form.requestSubmit) { form.requestSubmit(); } else { form.submit(); }
  }

  // A chat opens at its newest message, not where the last visit was scrolled to.
  if ("scrollRestoration" in history) history.scrollRestoration = "manual";
  window.addEventListener("load", function () {
    if (document.getElementById("transcript") && follow && !location.hash) toBottom();
  });

  document.addEventListener("DOMContentLoaded", function () {
    restoreDraft();
    document.querySelectorAll("textarea#message, textarea#first-message").forEach(function (field) {
      field.addEventListener("keydown", onKeydown);
    });
    var field = box();
    if (field) field.addEventListener("input", saveDraft);
    window.addEventListener("scroll", function () { follow = nearBottom(); }, { passive: true });
    updateRunningState();
    var target = location.hash && document.getElementById(location.hash.slice(1));
    if (target) {
      // A link to a place on the page (an undo's outcome): show it, do not jump past it.
      target.scrollIntoView({ block: "center" });
      follow = false;
    } else if (document.getElementById("transcript")) {
      toBottom();
      follow = true;
    }
    // The composer is where a person starts: focused on load (without scrolling to it).
    if (field && !target && document.activeElement === document.body) field.focus({ preventScroll: true });
  });

  // Esc stops the reply being written (the running turn's Stop button), from anywhere.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
    var stop = document.querySelector("#transcript .turn[data-active] .stop-form");
    if (!stop) return;
    event.preventDefault();
    if (stop.requestSubmit) { stop.requestSubmit(); } else { stop.submit(); }
  });

  document.addEventListener("htmx:beforeSwap", function () { follow = nearBottom() || follow; });

  document.addEventListener("htmx:afterSettle", function () {
    dedupeMarkers();
    updateRunningState();
    if (follow) toBottom();
  });

  document.addEventListener("htmx:configRequest", function (event) {
    var form = composer();
    if (form && event.detail.elt === form) form.setAttribute("data-sending", event.detail.parameters.get ? event.detail.parameters.get("message") : (box() || {}).value);
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var form = composer();
    var xhr = event.detail.xhr;
    if (!form || event.detail.elt !== form || !xhr) return;
    var sent = form.getAttribute("data-sending");
    form.removeAttribute("data-sending");
    // Only an accepted message empties the box, and only if the box still holds what was
    // sent: a refusal, or words typed while the request was on its way, are kept.
    if (xhr.status >= 200 && xhr.status < 300) {
      var field = box();
      if (field && field.value === sent) field.value = "";
      saveDraft();
      var error = document.getElementById("composer-error");
      if (error) error.textContent = "";
      follow = true;
      toBottom();
    }
  });
})();
