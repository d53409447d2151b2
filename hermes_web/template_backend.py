"""Django's template backend, with pages that always encode.

A lone surrogate stored in a message (accepted before the entrances checked, or written by an
older importer) makes the rendered page unencodable as UTF-8, and Django answers 500 for the
whole page. The input checks (``hermes_web.validation``) keep new data clean; this keeps every
page of old data readable by replacing such characters with U+FFFD in the rendered output.
"""

from django.template import TemplateDoesNotExist
from django.template.backends.django import DjangoTemplates, Template, reraise
from django.utils.safestring import SafeString

from hermes_web.validation import lone_surrogate_at, scrub_surrogates


class ScrubbedTemplate(Template):
    def render(self, context=None, request=None):
        output = super().render(context, request)
        if lone_surrogate_at(output) is None:
            return output
        return SafeString(scrub_surrogates(output))


class ScrubbingDjangoTemplates(DjangoTemplates):
    """``DjangoTemplates`` whose rendered output never holds a lone surrogate."""

    def from_string(self, template_code):
        return ScrubbedTemplate(self.engine.from_string(template_code), self)

    def get_template(self, template_name):
        try:
            return ScrubbedTemplate(self.engine.get_template(template_name), self)
        except TemplateDoesNotExist as exc:
            reraise(exc, self)
