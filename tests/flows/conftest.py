"""Fixtures shared by the end-to-end tests."""
import pytest

from tests.conftest import ROOT
from tests.flows.forkrun import ForkServer


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory):
    """One process with torch and ChatTTS imported that forks a child per render (cheap to SIGKILL)."""
    s = ForkServer(ROOT, tmp_path_factory.mktemp("logs"))
    yield s
    s.close()
