"""The chat agent: the worker's turn loop (``loop``), context-overflow recovery (``overflow``),
workspace tools and the offline demo model. What the views call is ``services.chat``.

litellm is imported lazily (it takes seconds to import), so web processes that only render
pages never pay for it.
"""

# The model rules live in hermes_web.llm_models; these names stay importable from here.
from hermes_web.llm_models import DEMO_MODEL, DEMO_MODEL_LABEL, is_demo_model, model_label

__all__ = ["DEMO_MODEL", "DEMO_MODEL_LABEL", "is_demo_model", "model_label"]
