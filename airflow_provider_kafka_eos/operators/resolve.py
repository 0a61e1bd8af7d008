"""KafkaTransactionResolutionOperator: one ``kafka-eos-txn`` action, run from Airflow.

The manual resolution DAG is the UI twin of the CLI, so both go through
``kafka/operations/resolution_request.py``: the same validation (commit needs producer id *and*
epoch), the same messages, the same rows. This operator only translates the DAG run's form (``params``) into a
``ResolutionRequest``, logs the rows as a table and pushes them to XCom.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_kafka_eos.kafka.operations.scan import format_table
from airflow_provider_kafka_eos.tasks.fail_now import raises_fail_now

# The form fields of the manual DAG, in the order the UI shows them (see dags/eos_manual_resolution.py).
FORM_FIELDS = (
    "action",
    "transactional_id",
    "producer_id",
    "epoch",
    "prefix",
    "manifest_uri",
    "manifest_base_uri",
    "unprotected",
    "dry_run",
)


# The request field each form field fills in (the form says "prefix", the request "prefixes").
REQUEST_FIELD_OF_FORM_FIELD = {
    "transactional_id": "transactional_id",
    "producer_id": "producer_id",
    "epoch": "epoch",
    "prefix": "prefixes",
    "manifest_uri": "manifest_uri",
    "dry_run": "dry_run",
}


def form_field_names(params: Any = None) -> dict[str, str]:
    """Request field -> how the form names it (its title, quoted, with the field key), for messages.

    ``params`` is the DAG's ``ParamsDict`` (titles come from its ``Param`` schemas); without one,
    the field keys themselves are used, so a message still names what to fill in.
    """
    names = {}
    for form_key, request_field in REQUEST_FIELD_OF_FORM_FIELD.items():
        title = None
        if params is not None and form_key in params:
            param = params.get_param(form_key) if hasattr(params, "get_param") else None
            title = (getattr(param, "schema", None) or {}).get("title")
        names[request_field] = f"'{title}' ({form_key})" if title else f"'{form_key}'"
    return names


def _blank_to_none(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _split(value: Any) -> tuple[str, ...]:
    """A form's text field ("a-, b-") or a list -> a tuple of non-empty strings."""
    value = _blank_to_none(value)
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    return tuple(str(v).strip() for v in value if str(v).strip())


def _int_or_none(value: Any, name: str) -> int | None:
    """A whole number from a form field; ``name`` is how the form names the field."""
    value = _blank_to_none(value)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        from airflow_provider_kafka_eos.kafka.errors import UsageError

        raise UsageError(f"{name} must be a whole number, got {value!r}") from None


# Which manifest store a task uses, given its own setting: KafkaEosHook.manifest_store_setting.
StoreSetting = Callable[[str | None], tuple[str | None, str]]


def request_from_form(
    form: Mapping[str, Any],
    *,
    store_setting: StoreSetting | None = None,
    field_names: Mapping[str, str] | None = None,
) -> Any:
    """``ResolutionRequest`` from the manual DAG's params (blank text fields mean "not given").

    ``manifest_base_uri`` is the store every abort reads first; which store that is, given the
    form's field, is the hook's one rule (``store_setting``: the form's URI, else the connection's,
    with the form's store's credentials applied); without ``store_setting``, the form's field alone.
    ``unprotected`` is the form's explicit switch around its PREPARED protection.
    """
    from airflow_provider_kafka_eos.kafka.operations.resolution_request import ResolutionRequest

    names = {**form_field_names(), **(field_names or {})}
    store = _blank_to_none(form.get("manifest_base_uri"))
    if store_setting is not None:
        store = store_setting(store)[0]
    return ResolutionRequest(
        action=str(form.get("action") or "").strip(),
        transactional_id=_blank_to_none(form.get("transactional_id")),
        producer_id=_int_or_none(form.get("producer_id"), names["producer_id"]),
        epoch=_int_or_none(form.get("epoch"), names["epoch"]),
        prefixes=_split(form.get("prefix")),
        manifest_uri=_blank_to_none(form.get("manifest_uri")),
        dry_run=bool(form.get("dry_run")),
        manifest_base_uri=store,
        protect=not bool(form.get("unprotected")),
    )


class KafkaTransactionResolutionOperator(BaseOperator):
    """Run one resolution action (list, describe, abort, commit, commit-from-manifest, ...).

    :param request: the form as a mapping (keys of ``FORM_FIELDS``); ``None`` reads the DAG
        run's ``params``, which is what the manual resolution DAG's form fills in.

    A request that fails validation raises ``UsageError`` before anything is sent to Kafka.
    XCom ``return_value``: ``{"action", "rows", "summary", "ok"}``.
    """

    template_fields: Sequence[str] = ("request",)
    ui_color = "#d9ead3"

    def __init__(
        self,
        *,
        kafka_eos_conn_id: str = "kafka_eos_default",
        request: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.request = request

    @raises_fail_now
    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
        from airflow_provider_kafka_eos.kafka.operations.resolution import run_resolution

        form = dict(self.request if self.request is not None else context["params"])
        # First line of the log: the request exactly as submitted, before anything can reject it.
        submitted = {k: form.get(k) for k in FORM_FIELDS if k in form}
        self.log.info("resolution request as submitted: %s", submitted)
        names = form_field_names(getattr(getattr(self, "dag", None), "params", None))
        hook = KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id)
        request = request_from_form(form, store_setting=hook.manifest_store_setting, field_names=names)
        request.validate(names)  # the CLI's rules in the form's words, before any connection is opened
        if not request.protect and request.action == "abort":
            self.log.warning(
                "UNPROTECTED ABORT (unprotected=true): transactions listed in PREPARED manifests will be "
                "aborted too; their checkpoints' batches are lost"
            )
        access = hook.store_access(request.manifest_uri or request.manifest_base_uri)  # store credentials
        with hook.transaction_admin() as admin:
            result = run_resolution(admin, request, progress=self._progress, access=access)
        rows = [dict(row) for row in result.rows]
        self.log.info("%s\n%s", result.summary, self.table(rows))
        for warning in result.warnings:  # e.g. a listing Kafka filtered by the principal's rights
            self.log.warning("%s", warning)
        outcome = {"action": request.action, "rows": rows, "summary": result.summary, "ok": bool(result.ok)}
        if result.warnings:
            outcome["warnings"] = list(result.warnings)
        if not result.ok:
            from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

            raise KafkaEosError(result.summary, transactional_id=request.transactional_id)
        return outcome

    def _progress(self, done: int, total: int, label: str = "") -> None:
        self.log.info("%s %d/%d", label or "progress", done, total)

    @staticmethod
    def table(rows: Sequence[Mapping[str, Any]]) -> str:
        if not rows:
            return "(no rows)"
        columns = list(dict.fromkeys(key for row in rows for key in row))
        return format_table(
            [[c.upper() for c in columns], *[[_cell(row.get(c)) for c in columns] for row in rows]]
        )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)
