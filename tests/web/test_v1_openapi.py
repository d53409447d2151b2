"""``/api/docs`` lists the ``/v1`` model endpoints (issue #39 leftovers): chat completions,
Responses and Anthropic Messages, with their bodies, the bearer key and their statuses."""

import pytest

pytestmark = pytest.mark.django_db

V1 = ("/v1/chat/completions", "/v1/responses", "/v1/messages")


def test_the_openapi_document_lists_the_v1_endpoints(alice_client):
    schema = alice_client.get("/api/openapi.json").json()
    schemes = schema["components"]["securitySchemes"]
    bearer = [name for name, s in schemes.items() if s == {**s, "type": "http", "scheme": "bearer"}]
    assert bearer
    ids = set()
    for path in V1:
        post = schema["paths"][path]["post"]
        ids.add(post["operationId"])
        assert set(post["security"][0]) <= set(bearer)
        assert {"200", "400", "401", "413", "429", "502", "503", "504"} <= set(post["responses"])
        request = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        body = schema["components"]["schemas"][request.rsplit("/", 1)[1]]
        assert {"model", "stream"} <= set(body["properties"])
        reply = post["responses"]["200"]["content"]
        assert {"application/json", "text/event-stream"} <= set(reply)
    assert len(ids) == 3  # unique operation ids: a generated client gets three methods
    messages = schema["components"]["schemas"]["V1MessagesIn"]
    assert {"messages", "max_tokens", "system"} <= set(messages["properties"])

    # The Swagger page draws this document from our own static files (it renders offline).
    page = alice_client.get("/api/docs").content.decode()
    assert "swagger-ui" in page
    assert "cdn" not in page.lower()
    assert "https://" not in page.split("<body", 1)[0]
