"""Version bounds for registrations: Kafka's schema minimums, and the caps this broker implements."""

from __future__ import annotations


def schema_min_version(message_class: type) -> int:
    """The oldest version Kafka still accepts for this API (``validVersions`` in its JSON schema).

    kafka-python widens every schema to start at 0 for its own client use; a broker must not
    advertise versions Kafka 4 removed (e.g. Produce < 3, Fetch < 4).
    """
    valid = str(message_class.json["validVersions"])
    return int(valid.split("-")[0].rstrip("+"))
