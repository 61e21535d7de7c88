"""The LLM layer: the only code that talks to litellm (imported lazily)."""
