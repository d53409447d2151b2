from django.contrib import admin
from django.contrib.auth.views import LogoutView
from django.contrib.staticfiles.views import serve as serve_static
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404
from django.urls import include, path, re_path

from hermes_web.api import api
from hermes_web.views import (
    accounts,
    chat,
    conversations,
    fate,
    hurt,
    imports,
    inspector,
    native,
    search,
)
from hermes_web.views import api_keys as api_key_views
from hermes_web.views import follow as follow_views


def static_files(request, path):
    # The app serves its own few static files (no CDN, no separate web server needed);
    # a deployment in front of nginx can still collectstatic and serve them there.
    # A path that climbs out (``/static/%2e%2e/...``) is simply not a static file: 404.
    if ".." in path.replace("\\", "/").split("/") or "\x00" in path:
        raise Http404("not a static file")
    try:
        return serve_static(request, path, insecure=True)
    except SuspiciousFileOperation:
        raise Http404("not a static file") from None


urlpatterns = [
    path("", accounts.home, name="home"),
    path("healthz", accounts.healthz, name="healthz"),
    path("accounts/login/", accounts.HermesLoginView.as_view(), name="login"),
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("conversations/", conversations.conversation_list, name="conversation_list"),
    path(
        "conversations/<str:public_id>/",
        conversations.conversation_detail,
        name="conversation_detail",
    ),
    path(
        "conversations/<str:public_id>/messages/<int:position>/",
        conversations.message_detail,
        name="message_detail",
    ),
    path("conversations/<str:public_id>/follow/", fate.follow_fact, name="follow_fact"),
    path(
        "conversations/<str:public_id>/live/",
        follow_views.conversation_live,
        name="conversation_live",
    ),
    path(
        "compactions/<str:public_id>/recall-test/",
        fate.recall_test_panel,
        name="recall_test_panel",
    ),
    path(
        "compactions/<str:public_id>/recall-test/start/",
        fate.recall_test_start,
        name="recall_test_start",
    ),
    path("conversations/<str:public_id>/what-if/", inspector.what_if, name="what_if"),
    path(
        "conversations/<str:public_id>/tree/", inspector.conversation_tree, name="conversation_tree"
    ),
    path(
        "conversations/<str:public_id>/timeline/",
        inspector.conversation_timeline,
        name="conversation_timeline",
    ),
    path("compactions/<str:public_id>/", inspector.compaction_detail, name="compaction_detail"),
    path("compactions/<str:public_id>/audit/", inspector.compaction_audit, name="compaction_audit"),
    path(
        "compactions/<str:public_id>/summarizer-<str:part>/",
        inspector.compaction_summarizer_text,
        name="compaction_summarizer_text",
    ),
    path(
        "compactions/<str:public_id>/final-list/",
        inspector.compaction_final_list,
        name="compaction_final_list",
    ),
    path(
        "compactions/<str:public_id>/report.json",
        inspector.compaction_report_json,
        name="compaction_report_json",
    ),
    path(
        "compactions/<str:public_id>/report.md",
        inspector.compaction_report_md,
        name="compaction_report_md",
    ),
    path("compactions/<str:public_id>/replay/", native.compaction_replay, name="compaction_replay"),
    path(
        "compactions/<str:public_id>/commit/", inspector.commit_compaction, name="commit_compaction"
    ),
    path("chat/", chat.chat, name="chat"),
    path("chat/new/", chat.chat_new, name="chat_new"),
    path("chat/turns/<str:public_id>/", chat.chat_turn_status, name="chat_turn_status"),
    path(
        "chat/compactions/<str:public_id>/",
        chat.chat_compaction_status,
        name="chat_compaction_status",
    ),
    path("chat/<str:public_id>/", chat.chat_detail, name="chat_detail"),
    path("chat/<str:public_id>/send/", chat.chat_send, name="chat_send"),
    path("chat/<str:public_id>/compress/", chat.chat_compress, name="chat_compress"),
    path("chat/<str:public_id>/regenerate/", chat.chat_regenerate, name="chat_regenerate"),
    path("chat/<str:public_id>/rename/", chat.chat_rename, name="chat_rename"),
    path("chat/<str:public_id>/delete/", chat.chat_delete, name="chat_delete"),
    path("chat/<str:public_id>/earlier/", chat.chat_earlier, name="chat_earlier"),
    path("chat/turns/<str:public_id>/stop/", chat.chat_turn_stop, name="chat_turn_stop"),
    path(
        "chat/compactions/<str:public_id>/<str:action>/",
        chat.chat_compaction_undo,
        name="chat_compaction_undo",
    ),
    path(
        "compactions/<str:public_id>/undo/",
        inspector.compaction_undo,
        {"action": "undo"},
        name="compaction_undo",
    ),
    path(
        "compactions/<str:public_id>/redo/",
        inspector.compaction_undo,
        {"action": "redo"},
        name="compaction_redo",
    ),
    path("compare/", inspector.compare, name="compare"),
    path("search/", search.search_page, name="search"),
    path("hurt/", hurt.hurt_page, name="hurt"),
    path("import/", imports.import_page, name="import_page"),
    path("settings/follow/", follow_views.follow_folders, name="follow_folders"),
    path("settings/follow/add/", follow_views.follow_folder_add, name="follow_folder_add"),
    path(
        "settings/follow/<int:folder_id>/remove/",
        follow_views.follow_folder_remove,
        name="follow_folder_remove",
    ),
    path("settings/api-keys/", api_key_views.api_keys, name="api_keys"),
    path("settings/api-keys/new/", api_key_views.create_api_key, name="create_api_key"),
    path(
        "settings/api-keys/<str:key_id>/revoke/",
        api_key_views.revoke_api_key,
        name="revoke_api_key",
    ),
    path("api/", api.urls),
    path("v1/", include("hermes_web.openai_compat.urls")),
    path("admin/", admin.site.urls),
    re_path(r"^static/(?P<path>.*)$", static_files),
    path("favicon.ico", lambda request: static_files(request, "hermes_web/favicon.ico")),
]

# On /v1 Django's own error pages are the protocol's JSON errors too (views/errors.py).
handler400 = "hermes_web.views.errors.bad_request"
handler403 = "hermes_web.views.errors.permission_denied"
handler500 = "hermes_web.views.errors.server_error"
