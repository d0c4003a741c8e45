"""chattts-render's ChatTTS engine.  See engine/api.py for the contract; nothing here imports Prefect."""
from engine.api import EngineOptions, ModelUnavailable, Request, Result  # noqa: F401
