from django.contrib import admin
from django.contrib.auth.views import LogoutView
from django.contrib.staticfiles.views import serve as serve_static
from django.urls import path, re_path

from hermes_web.api import api
from hermes_web.views import accounts, conversations, placeholders


def static_files(request, path):
    # The app serves its own few static files (no CDN, no separate web server needed);
    # a deployment in front of nginx can still collectstatic and serve them there.
    return serve_static(request, path, insecure=True)


urlpatterns = [
    path("", accounts.home, name="home"),
    path("healthz", accounts.healthz, name="healthz"),
    path("accounts/login/", accounts.HermesLoginView.as_view(), name="login"),
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("conversations/", conversations.conversation_list, name="conversation_list"),
    path("chat/", placeholders.chat, name="chat"),
    path("compare/", placeholders.compare, name="compare"),
    path("import/", placeholders.import_page, name="import_page"),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
    re_path(r"^static/(?P<path>.*)$", static_files),
]
