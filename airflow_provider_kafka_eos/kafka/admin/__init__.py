"""Admin: the transaction coordinator and the cluster, one module per API (describe/list, EndTxn,
fencing, LSO probe, capabilities, ACL checks) behind the :class:`~.transactions.TransactionAdmin`
facade, and the pure rule deciding whether a committable may be committed. Built on ``protocol``."""
