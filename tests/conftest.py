import os

# litellm must never reach for the network to fetch its price list.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
