"""Checkpoints: the manifest (the durable vote) and its format, the store and a checkpoint's life
(PREPARED -> COMMITTED / ABORTED), which run a checkpoint belongs to, transactional-id naming,
restore before a new checkpoint, and the abort strategies. Built on ``protocol``; the admin is
handed in by the caller."""
