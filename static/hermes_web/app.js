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
})();
