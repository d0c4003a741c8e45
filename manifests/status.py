"""A manifest row's status (its `status` column): the values every stage compares with.  No pyarrow, so the plan's
rules (tasks/plan/rows.py) load none where only they are needed (the render schema: flows/params.py)."""
STATUS_PENDING = "pending"
STATUS_DONE = "done"
STATUS_FAILED = "failed"
