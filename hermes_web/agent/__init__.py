"""The chat agent: workspace tools, the offline demo model, and the turn loop (runner).

litellm is imported lazily (it takes seconds to import), so web processes that only render
pages never pay for it.
"""

DEMO_MODEL = "hermes-demo/agent"
DEMO_MODEL_LABEL = "demo model (offline)"
# The demo model's window: small enough that the 64,000-token trigger floor is the threshold,
# so a few large tool outputs cross it within a handful of messages.
DEMO_CONTEXT_LENGTH = 64_000


def is_demo_model(model: str) -> bool:
    return model == DEMO_MODEL


def model_label(model: str) -> str:
    """How a model string is shown to people: the demo model always says what it is."""
    if not model or is_demo_model(model):
        return DEMO_MODEL_LABEL
    return model
