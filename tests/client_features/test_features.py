"""ClientFeatures: what a run offers servers, and each server's requests answered as its own, on both wires."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest
from conftest import ROOT, WIRES

from decodeloop.errors import RpcError
from decodeloop.mcp.client_features import ClientFeatures
from decodeloop.tools.config import ServerSpec
from decodeloop.tools.startup import ClientOptions, start_servers

ASKING = [sys.executable, os.path.join(ROOT, "tests", "servers", "asking.py")]
FORM = {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}


def asked(router, tool: str, request: dict, timeout: float | None = None) -> dict:
    """What the asking server got back from the client, as JSON."""
    client = router.clients["asking"]
    result = client.call_tool(tool, {"request": request}, timeout=timeout)
    return json.loads(result.content[0]["text"])


def test_capabilities_declare_only_what_is_offered():
    assert ClientFeatures().capabilities() == {}
    offered = ClientFeatures(offer_sampling=True, offer_elicitation=True).capabilities()
    assert offered == {"sampling": {}, "elicitation": {"form": {}, "url": {}}}


@pytest.mark.parametrize("wire", WIRES)
def test_a_request_is_answered_as_its_servers_and_linked_to_the_call(wire):
    seen = []

    def elicitation(server, params, calls):
        seen.append((server, params["message"], calls))
        return {"action": "decline"}

    features = ClientFeatures(elicitation=elicitation)
    with start_servers(
        [ServerSpec("asking", ASKING, protocol=wire)], options=ClientOptions(features=features)
    ) as router:
        assert asked(router, "elicit", FORM) == {"result": {"action": "decline"}}
    assert seen == [("asking", "Your name?", ["elicit"])]


@pytest.mark.parametrize("wire", WIRES)
def test_a_feature_offered_but_unset_is_refused_with_an_error_the_server_reads(wire):
    features = ClientFeatures(offer_elicitation=True)
    with start_servers(
        [ServerSpec("asking", ASKING, protocol=wire)], options=ClientOptions(features=features)
    ) as router:
        if wire == "2025-11-25":
            answer = asked(router, "elicit", FORM)
            assert answer["error"]["code"] == -32601 and "no elicitation" in answer["error"]["message"]
        else:  # an input request has no error answer: the call fails on our side, naming what was refused
            with pytest.raises(RpcError) as refused:
                asked(router, "elicit", FORM)
            assert refused.value.code == -32601
            assert "refused the server's elicitation/create" in refused.value.message


def test_the_calls_timeout_waits_while_the_user_answers_the_servers_request():
    # the answer takes three times the call's timeout: the server asked for that time, so the call goes on
    def elicitation(server, params, calls):
        time.sleep(1.5)
        return {"action": "cancel"}

    features = ClientFeatures(elicitation=elicitation)
    with start_servers(
        [ServerSpec("asking", ASKING, protocol="2025-11-25")], options=ClientOptions(features=features)
    ) as router:
        assert asked(router, "elicit", FORM, timeout=0.5) == {"result": {"action": "cancel"}}
