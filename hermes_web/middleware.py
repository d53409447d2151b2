"""Request checks that apply to every route."""

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

FORM = "application/x-www-form-urlencoded"


class RefuseNulMiddleware:
    """Answer 400 to a NUL character (U+0000) in the path, the query or a form field.

    No value of this app can hold one, and PostgreSQL refuses it in any text it is handed (a
    lookup by ``/api/sessions/%00`` or a chat message with a NUL failed with a 500). Only
    url-encoded forms are read here: multipart uploads keep their own handlers and checks.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = self._nul_in(request)
        if where:
            return HttpResponseBadRequest(
                f"The request's {where} contains a NUL character (U+0000); nothing was done.",
                content_type="text/plain",
            )
        return self.get_response(request)

    @staticmethod
    def _nul_in(request: HttpRequest) -> str:
        if "\x00" in request.path:
            return "path"
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in v for v in values):
                return f"query parameter {key.replace(chr(0), '')!r}"
        if request.method == "POST" and request.content_type == FORM:
            for key, values in request.POST.lists():
                if "\x00" in key or any("\x00" in v for v in values):
                    return f"form field {key.replace(chr(0), '')!r}"
        return ""
