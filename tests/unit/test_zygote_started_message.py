"""The zygote formats its `started` message by hand (fewer pages written after each fork); the worker
must not be able to tell: the bytes are exactly what `encode_message` would send."""

from app.executor.protocol import MessageReader, encode_message, encode_started


def test_the_started_message_is_the_encoders_bytes():
    for execution_id, pid in ((1, 2), (123456789012, 4194304), (0, 1)):
        expected = encode_message({"type": "started", "execution_id": execution_id, "pid": pid})
        assert encode_started(execution_id, pid) == expected
        assert MessageReader().feed(expected) == [{"type": "started", "execution_id": execution_id, "pid": pid}]


def test_an_id_that_is_not_an_int_still_makes_a_message():
    assert encode_started("7", 9) == encode_message({"type": "started", "execution_id": "7", "pid": 9})
