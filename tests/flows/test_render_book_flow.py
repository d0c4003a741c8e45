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


def test_shards_need_a_deployment_run(tmp_path, harness):
    """A direct call cannot start runs of its deployment: refused before anything is written."""
    from flows.render_book import render_book_flow
    from tests.flows.helpers import write_txt_book

    book = write_txt_book(tmp_path / "short.txt", chapters=1, sentences=3)
    with pytest.raises(ValueError, match="shards > 1"):
        render_book_flow(book=str(book), out=str(tmp_path / "out"), model="random-tiny", shards=2)
    with pytest.raises(ValueError, match="shards must be"):
        render_book_flow(book=str(book), out=str(tmp_path / "out"), model="random-tiny", shards=0)
    assert not (tmp_path / "out").exists()


def test_a_second_run_of_a_book_is_refused_by_prefects_concurrency_limit(tmp_path, harness, s3_server):
    """A render into a store, where no flock can see another machine: the test process holds only the book's
    Prefect slot (as a run on another machine would), so the refusal is Prefect's; once it is free the same
    run renders."""
    from flows.concurrency import limit_name, one_run_per_book
    from flows.options import options_from_params
    from flows.render_book import render_book_flow
    from manifests.lock import BookLocked
    from tests.flows.helpers import write_txt_book
    from tests.s3server import environ_with

    book = write_txt_book(tmp_path / "short.txt", chapters=1, sentences=3)
    run = dict(book=str(book), out=f"s3://{s3_server.bucket('slots')}/out", model="random-tiny",
               scratch=str(tmp_path / "scratch"))
    with environ_with(s3_server.env()):
        opts = options_from_params(run["book"], out=run["out"], scratch=run["scratch"])
        with one_run_per_book(opts):
            with pytest.raises(BookLocked, match=f"flow run \\(Prefect concurrency limit {limit_name(opts)}\\)"):
                render_book_flow(**run)
            assert s3_server.filesystem().find("slots") == []
        assert render_book_flow(**run) == str(opts.book_dir)
    assert [k for k in s3_server.filesystem().find("slots") if k.startswith("slots/out/short/manifest/part-")]
