"""The QA tests' models: Whisper base (the Hugging Face cache, else the test extra's bundled copy) and the
speaker encoder, loaded once per test process (session), one thread.  Absent: skipped, a failure under CI=true."""
from __future__ import annotations

import pytest

from tests.conftest import unavailable


@pytest.fixture(scope="session")
def transcriber():
    from tasks.errors import QAUnavailable
    from tasks.qa.asr import load_transcriber

    try:
        return load_transcriber("base", "cpu", threads=1)
    except QAUnavailable as e:
        unavailable(f"Whisper base cannot load: {e} (scripts/setup.sh test installs the test extra)")


@pytest.fixture(scope="session")
def speaker_encoder():
    from tasks.errors import QAUnavailable

    try:
        import torch

        from tasks.qa.speaker import load_encoder

        torch.set_num_threads(1)
        return load_encoder("cpu")
    except (QAUnavailable, ImportError) as e:
        unavailable(f"the speaker encoder cannot load: {e}")
