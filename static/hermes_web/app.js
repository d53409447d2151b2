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
})();
