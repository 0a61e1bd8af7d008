"""A Protobuf message class built at run time from a FileDescriptorProto (no .proto compiler, no
generated code in the repository): what a user's generated ``order_pb2.Order`` would be."""

from __future__ import annotations

from typing import Any


def order_message(*, imports_timestamp: bool = False) -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    F = descriptor_pb2.FieldDescriptorProto
    name = "shop/order_ts.proto" if imports_timestamp else "shop/order.proto"
    file_proto = descriptor_pb2.FileDescriptorProto(name=name, package="shop", syntax="proto3")
    order = file_proto.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    for number, (field, kind) in enumerate((("id", F.TYPE_INT64), ("customer", F.TYPE_STRING),
                                            ("amount", F.TYPE_DOUBLE), ("paid", F.TYPE_BOOL),
                                            ("blob", F.TYPE_BYTES)), start=1):
        order.field.add(name=field, number=number, type=kind, label=F.LABEL_OPTIONAL)
    order.field.add(name="lines", number=6, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                    type_name=".shop.Order.Line")
    file_proto.message_type.add(name="Refund").field.add(name="id", number=1, type=F.TYPE_INT64,
                                                         label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    if imports_timestamp:
        file_proto.dependency.append("google/protobuf/timestamp.proto")
        order.field.add(name="at", number=7, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                        type_name=".google.protobuf.Timestamp")
        pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(file_proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
