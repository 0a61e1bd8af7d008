"""Operations: what a person or a task runs over the layers below: classify lingering
transactions, the findings store, one resolution action (CLI and UI), preflight."""
