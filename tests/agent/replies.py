"""A reply function for the tests, named as a user names theirs (`AGENT_REPLY`): it hands
a question over to a person and thanks for anything else."""

from pipelines.agent.reply import HANDOVER


def thank_or_hand_over(request, _warehouse) -> str:
    if "?" in request.last_text:
        return HANDOVER
    return f"Thank you, conversation {request.conversation_id}."


def fail_quoting(request, _warehouse) -> str:
    """Fails with the member's words in its error, as a careless function would."""
    raise ValueError(f"no order found for {request.last_text!r}")


def route_even_conversations(request, _warehouse) -> str | dict:
    """Hands an even conversation over to a team its id names; thanks an odd one."""
    if request.conversation_id % 2:
        return "Thank you."
    return {"handover": {"team_id": request.conversation_id % 7 + 1}}
