"""What every task of the provider shares (operators, sensors, triggers): which errors fail a
task at once instead of burning its retries (``fail_now``), and the metrics it emits (``metrics``)."""
