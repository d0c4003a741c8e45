"""chattts-render's ChatTTS engine: engine/api.py is the contract (EngineOptions, Request, Result, ModelUnavailable),
engine/engine.py the Engine.  Imports only engine/; nothing here imports Prefect or the pipeline."""
