"""A reply function's routed handover (docs/agent.md, "Routed handovers") against the sandbox's
conversation service: the turn is answered `<HUMAN_HANDOVER>`, the next sync compacts it, and
the next push assigns the member to the team, once however often the turn came and whichever
receiver answered it; a team the service does not have is refused, kept in `sync.rejected`
with its field and shown in `conversation.agent_requests`."""

import duckdb

from cli.main import main
from pipelines.agent.reply import HANDOVER, Route
from pipelines.agent.request import request_key
from tests.agent.conftest import turn
from tests.push.test_conversation import Applied, directory, members_of
from tests.push.test_push import run_push

#: A team id no region of the sandbox has.
NO_SUCH_TEAM = 999_999


def participant(channel_id: int, member_id: int) -> dict:
    return {"members": [{"channel_id": channel_id, "member_id": member_id, "channel_type": "line"}]}


def test_a_handover_naming_a_team_assigns_the_member_once(
    start_sandbox, sync_env, serve_agent, monkeypatch
):
    sandbox = start_sandbox()
    monkeypatch.delenv("WAREHOUSE_SQL", raising=False)  # no outbound view: the agent's rows
    monkeypatch.delenv("SYNC_STORE", raising=False)
    monkeypatch.delenv("AGENT_INBOX", raising=False)
    resources = sync_env(sandbox)
    applied = Applied(sandbox, monkeypatch)
    teams, _, _ = directory(applied, "default")
    (channel, member), (other_channel, other_member) = members_of(applied, "default", 2)
    routed_to = {member: teams[0], other_member: NO_SUCH_TEAM}

    def route(request, _warehouse):
        if "refund" not in request.last_text:
            return "Thank you!"
        return {"handover": {"team_id": routed_to[request.member.member_id]}}

    first, second = serve_agent(route), serve_agent(route)  # two receivers, one inbox
    asked = turn(1, participants=participant(channel, member))
    asked["messages"][0]["text"] = "I want a refund"
    for receiver in (first, second, first):  # the same turn three times, over both
        answer = receiver.send(asked)
        assert answer.status_code == 200 and answer.json() == {"reply_text": HANDOVER}
    refused = turn(2, participants=participant(other_channel, other_member))
    refused["messages"][0]["text"] = "refund please"
    assert second.send(refused).json() == {"reply_text": HANDOVER}
    thanked = turn(3, participants=participant(channel, member))
    assert first.send(thanked).json() == {"reply_text": "Thank you!"}

    assert main(["sync", "--streams", "conversation.agent_requests"]) == 0
    figures = run_push(resources, record_types=["conversation_assignment"])
    assert figures["conversation_assignment"]["sent"] == 1
    assert figures["conversation_assignment"]["refused"] == 1
    assert applied.assigned == {("default", member): 1}
    relationship = {"team_id": teams[0], "user_id": None}
    expected = {"assign_type": "case-based", "assignment_relationship": relationship}
    assert applied.assignment("default", member) == expected

    again = run_push(resources, record_types=["conversation_assignment"])  # nothing new
    assert again["conversation_assignment"]["refused_before"] == 1
    assert applied.assigned == {("default", member): 1}

    with duckdb.connect(resources["lake"].warehouse_path, read_only=True) as con:
        rejected = con.execute(
            "SELECT key, field, source FROM sync.rejected "
            "WHERE record_type = 'conversation_assignment'"
        ).fetchall()
        shown = con.execute(
            "SELECT member_id, outcome, handover_team_id, routing, routing_error "
            "FROM conversation.agent_requests ORDER BY conversation_id"
        ).fetchall()
    key = f"default:{other_channel}:{other_member}"
    assert rejected == [(key, "assignment_relationship.team_id", "service")]
    assert shown[0][:4] == (member, "routed", teams[0], "assigned")
    assert shown[1][:4] == (other_member, "routed", NO_SUCH_TEAM, "refused")
    assert "assignment_relationship.team_id" in shown[1][4]
    assert shown[2] == (member, "replied", None, None, None)  # text, as before


def test_what_a_reply_function_may_route_and_what_it_may_not(serve_agent):
    """A routed handover is answered `<HUMAN_HANDOVER>`; anything else that is not text is
    the handover for `not text`, saying what was wrong, and routes nothing."""
    asked: list = []
    agent = serve_agent(lambda _request, _warehouse: asked[-1])
    cases = [
        ({"handover": {"user_id": 12, "assign_type": "permanent"}}, "routed"),
        ({"handover": {"team_id": 3, "connection": "jp"}}, "routed"),
        ({"handover": {"team_id": "3"}}, "team_id is not a whole number from 1"),
        ({"handover": {"team_id": True}}, "team_id is not a whole number from 1"),
        ({"handover": {"team_id": 0}}, "team_id is not a whole number from 1"),
        ({"handover": {}}, "names no team_id or user_id"),
        ({"handover": {"team_id": 3, "assign_type": "unassigned"}}, "assign_type is not one of"),
        ({"handover": {"team_id": 3, "queue": "vip"}}, "unknown handover field(s) ['queue']"),
        ({"team_id": 3}, 'expected text, or {"handover"'),
    ]
    for n, (returned, said) in enumerate(cases):
        asked.append(returned)
        document = turn(100 + n)
        assert agent.send(document).json() == {"reply_text": HANDOVER}
        stored = agent.inbox.answer_of(request_key(document)).answer
        if said == "routed":
            assert (stored.outcome, stored.error) == ("routed", None)
            assert stored.route == Route(**returned["handover"])
        else:
            assert (stored.outcome, stored.route) == ("not text", None)
            assert stored.error.startswith("the function returned ") and said in stored.error
