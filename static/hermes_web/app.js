// Small behaviours that used to be inline handlers: the Content Security Policy allows
// no inline script, so they live here and are bound by data attributes.
(function () {
  "use strict";
  // <form data-reset-on-success>: clear the form after htmx posted it successfully.
  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.target;
    if (form && form.matches && form.matches("form[data-reset-on-success]") && event.detail.successful) {
      form.reset();
    }
  });
  // <button data-copy="#id">: copy that element's text, and say so next to the button.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    var status = button.parentNode.querySelector(".copy-status");
    if (!source || !navigator.clipboard) {
      if (status) status.textContent = "Copying is not available here: select the text instead.";
      return;
    }
    navigator.clipboard.writeText(source.textContent.trim()).then(
      function () { if (status) status.textContent = "Copied."; },
      function () { if (status) status.textContent = "Could not copy: select the text instead."; }
    );
  });
  // [data-roving]: one Tab stop; the arrow keys, Home and End move between its links.
  document.addEventListener("keydown", function (event) {
    var cell = event.target;
    var group = cell.closest && cell.closest("[data-roving]");
    if (!group || cell.tagName !== "A") return;
    var cells = Array.prototype.slice.call(group.querySelectorAll("a"));
    var at = cells.indexOf(cell);
    var to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1, Home: 0, End: cells.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    to = Math.max(0, Math.min(cells.length - 1, to));
    cell.setAttribute("tabindex", "-1");
    cells[to].setAttribute("tabindex", "0");
    cells[to].focus();
  });
})();

// "Follow this": the text selected on the page fills an empty Follow field when the form is
// used (pointer or keyboard); without JavaScript the field is typed in.
(function () {
  var selected = "";
  document.addEventListener("selectionchange", function () {
    var text = String(window.getSelection ? window.getSelection() : "").trim();
    if (text && text.length <= 500) selected = text;
  });
  document.addEventListener("focusin", function (event) {
    var form = event.target.closest && event.target.closest("[data-follow-form]");
    if (!form) return;
    var input = form.querySelector("input[name=q]");
    if (input && !input.value && selected) input.value = selected;
  });
})();
