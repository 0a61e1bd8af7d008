"""Protocol: raw requests over kafka-python's connection layer (the one seam for its internals),
lanes (extra connections), how coordinator answers are read and retried, and the values the
coordinator speaks in (committables, transaction states). Imports only the modules of ``kafka/``
itself (errors, config, validation)."""
