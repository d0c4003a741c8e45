"""One book over several workers: a `render-book` run with `shards` N > 1 (the parent) plans the book, renders
(with proof on) each voice's first rows until its drift reference is frozen (tasks.stages.freeze_references: every
shard judges against it), writes the shard file (tasks/fleet/shards.py: N disjoint sets of the rows left, balanced
by expected tokens, and a token), starts N-1 runs of its own deployment with `shard` = 1 … N-1 and that token,
renders shard 0 itself (a parent that only waited would hold a worker's slot idle), waits until every shard run is
final, then, only when all completed and nothing is left to render, compacts the manifest and packages once.  A
failed shard fails the parent after the others ended; what any shard committed stays, and rerunning the parent
renders only the rest.

The parent keeps the book's flock, store lease and concurrency slot for the whole time; a shard run takes none
of them: its token, checked against the shard file (flows/pipeline.render_shard), is its authority."""
from __future__ import annotations

import os
import time

from tasks import stages
from tasks.fleet import shards as sharding

POLL_ENV = "CHATTTS_RENDER_POLL_S"     # s between looks at runs being waited for (default POLL_S)
POLL_S = 5.0


def fan_out(shards: int, call, on_done):
    """pipeline.render's synthesize step for a parent run of `shards` shards."""
    def step(book_dir, opts, store) -> dict:
        from prefect import get_run_logger
        from prefect.context import get_run_context

        parent = get_run_context().flow_run            # a deployment's run (render_book_flow checks)
        call(stages.freeze_references, book_dir, opts)  # with proof: every voice's drift reference, before the split
        plan = sharding.start(book_dir, shards, opts.guard)
        if store is not None:
            store.publish_records()                      # the book's engine, which every shard runs
            store.publish(sharding.SHARD_FILE)           # the shards on other machines read it from the store
        runs = [start_shard(parent, i, plan.token) for i in range(1, shards) if plan.shards[i]]   # not idle ones
        try:
            own = call(stages.synthesize, book_dir, opts, on_done, plan.shard(0))
            get_run_logger().info("%s: shard 0 rendered %d segments; waiting for %d more shards (%s)", book_dir,
                                  own["rendered"], len(runs), ", ".join(r.name for r in runs))
        finally:
            wait_for(runs)                               # every shard ends before the parent goes on or fails
        if store is not None:
            store.pull(records=False)                    # the shards' parts and audio; the records are the parent's
        counts = sharding.gather(book_dir, plan, opts.guard)
        if store is not None:
            store.remove(sharding.SHARD_FILE)
        return counts
    return step


def start_shard(parent, index: int, token: str):
    """A run of the parent's deployment for shard `index`: the parent's parameters and job variables."""
    from prefect.deployments import run_deployment

    params = {**parent.parameters, "shard": index, "shard_token": token, "catalogue": False}
    return run_deployment(parent.deployment_id, parameters=params, timeout=0, tags=["shard"],
                          job_variables=parent.job_variables or None,
                          idempotency_key=f"{parent.id}-{token}-{index}")


def wait_for(runs) -> None:
    """Wait until every flow run is final; then RuntimeError naming those that did not complete."""
    from prefect.client.orchestration import get_client

    pending = {r.id for r in runs}
    failed = []
    with get_client(sync_client=True) as client:
        while pending:
            for rid in list(pending):
                fr = client.read_flow_run(rid)
                if fr.state is not None and fr.state.is_final():
                    pending.discard(rid)
                    if not fr.state.is_completed():
                        failed.append(f"{fr.name}: {fr.state.type.value}")
            if pending:
                time.sleep(float(os.environ.get(POLL_ENV, POLL_S)))
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(runs)} runs did not complete: {', '.join(failed)}")
