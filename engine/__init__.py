"""chattts-render's ChatTTS engine: engine/api.py is the contract (EngineOptions, Request, Result, ModelUnavailable),
engine/engine.py the Engine.  Imports only engine/; nothing here imports Prefect or the pipeline."""
import os

# Large CPU tensors (the GPT weights, their packed copies, the KV cache) on transparent huge pages: a decode step
# streams ~750 MB of weights, and with 4 KB pages it runs ~20 % slower at 4 rows (measured, random-full, 2 threads:
# 90 -> 72 ms per step).  torch reads this once, at the process's first tensor allocation, so it is set here,
# before the engine imports torch (lazily); a value the user set wins, and a process that allocated tensors
# before importing the engine keeps 4 KB pages (only slower).
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
