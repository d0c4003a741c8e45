"""The render-book Prefect flow (under prefect_test_harness) writes the same files as the CLI, and with
catalogue=True (the nightly's runs) the output root's catalogue page and feed."""
from __future__ import annotations

import pytest

from flows.cli import main
from tests.flows.helpers import SAMPLE, chapter_files, tree_digest


@pytest.fixture(scope="module")
def harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def test_flow_output_equals_cli_output(tmp_path, harness):
    from prefect.artifacts import Artifact

    from flows.render_book import render_book_flow

    state = render_book_flow(book=str(SAMPLE), out=str(tmp_path / "flow"), model="random-tiny", catalogue=True,
                             return_state=True)
    book_dir = state.result()
    assert main([str(SAMPLE), "--model", "random-tiny", "--out", str(tmp_path / "cli")]) == 0
    flow_files = tree_digest(tmp_path / "flow" / "daodejing")
    cli_files = tree_digest(tmp_path / "cli" / "daodejing")
    produced = {k: v for k, v in flow_files.items() if not k.startswith("manifest/")}
    assert len(chapter_files(tmp_path / "flow" / "daodejing")) == 4
    assert produced == {k: v for k, v in cli_files.items() if not k.startswith("manifest/")}
    assert str(tmp_path / "flow" / "daodejing") == book_dir
    page = (tmp_path / "flow" / "index.html").read_text(encoding="utf-8")     # the catalogue, after the book
    assert 'data-folder="daodejing" data-status="done"' in page
    assert (tmp_path / "flow" / "feed.xml").read_text(encoding="utf-8").count("<item>") == 1
    assert not (tmp_path / "cli" / "index.html").exists()                      # a CLI render writes none
    assert sorted(task_run_names(state.state_details.flow_run_id)) == [     # the catalogue: planned, then done
        "package", "prepare", "synthesize", "write-catalogue", "write-catalogue"]
    art = Artifact.get("render-progress")
    assert art is not None and float(art.data) == 100.0


def task_run_names(flow_run_id) -> list[str]:
    """The task names of a flow run's task runs (a run's name is its task's name and a suffix)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return [r.name.rsplit("-", 1)[0] for r in runs]


def test_cli_flow_and_options_take_the_same_parameters(tmp_path):
    """Every CLI render option reaches the flow (and a deployment) and options_from_params by the same name."""
    import inspect

    from flows.cli import build_parser
    from flows.commands import render_params
    from flows.render_book import CATALOGUE_PARAMS, render_book_flow
    from tasks.options import options_from_params

    cli = set(render_params(build_parser().parse_args(["render", str(tmp_path / "b.txt")])))
    flow = set(inspect.signature(render_book_flow.fn).parameters)
    lib = set(inspect.signature(options_from_params).parameters)
    assert cli == flow - set(CATALOGUE_PARAMS) == lib and set(CATALOGUE_PARAMS) <= flow
