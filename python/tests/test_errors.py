"""pion.errors: the class of an error reply follows its code word; redis-py's
exceptions are mapped to the same classes; every class is a redis-py RedisError."""
from __future__ import annotations

import pytest
import redis.exceptions as rex

import pion
from pion import errors as E


@pytest.mark.parametrize("line, cls, code, message", [
    ("ERR syntax error", E.CommandError, "ERR", "syntax error"),
    ("NOSESSION session not found", E.SessionNotFoundError, "NOSESSION", "session not found"),
    ("NOKVCACHE V-store not enabled (use --kvcache)", E.NotEnabledError, "NOKVCACHE",
     "V-store not enabled (use --kvcache)"),
    ("NOPERSIST persistence is not enabled", E.PersistenceNotEnabledError, "NOPERSIST",
     "persistence is not enabled"),
    # The class follows the code word, whatever the text says.
    ("NOSESSION no such thing", E.SessionNotFoundError, "NOSESSION", "no such thing"),
    ("ERR session not found", E.CommandError, "ERR", "session not found"),
    ("ERR V-store not enabled (use --kvcache)", E.CommandError, "ERR",
     "V-store not enabled (use --kvcache)"),
    ("ERR unknown command 'NOPE', with args beginning with: ", E.UnknownCommandError, "ERR",
     "unknown command 'NOPE', with args beginning with: "),
    ("ERR wrong number of arguments for 'get' command", E.WrongArityError, "ERR",
     "wrong number of arguments for 'get' command"),
    ("OOM command not allowed when used memory > 'maxmemory'.", E.OutOfMemoryError, "OOM",
     "command not allowed when used memory > 'maxmemory'."),
    ("LOADING pion is loading the dataset in memory", E.LoadingError, "LOADING",
     "pion is loading the dataset in memory"),
    ("NOAUTH Authentication required.", E.NoAuthError, "NOAUTH", "Authentication required."),
    ("WRONGPASS invalid username-password pair", E.WrongPassError, "WRONGPASS",
     "invalid username-password pair"),
    ("NOPROTO unsupported protocol version", E.NoProtoError, "NOPROTO",
     "unsupported protocol version"),
    ("COLDMISS session evicted to cold tier", E.ColdMissError, "COLDMISS",
     "session evicted to cold tier"),
    ("WRONGTYPE Operation against a key", E.CommandError, "WRONGTYPE",
     "Operation against a key"),
    ("MOVED 3999 127.0.0.1:6381", E.CommandError, "MOVED", "3999 127.0.0.1:6381"),
    ("something without a code", E.CommandError, "ERR", "something without a code"),
])
def test_error_from_reply_by_code_word(line, cls, code, message):
    e = E.error_from_reply(line)
    assert type(e) is cls and e.code == code and e.message == message
    assert str(e) == f"{code} {message}".strip()


def test_a_text_that_merely_starts_like_a_refinement_stays_generic():
    # Only the server's exact texts refine -ERR; a longer text is a generic error.
    assert type(E.error_from_reply("ERR session not found here")) is E.CommandError


def test_every_error_is_a_redis_error():
    for name in E.__all__:
        obj = getattr(E, name)
        if isinstance(obj, type):
            assert issubclass(obj, rex.RedisError), name
    assert issubclass(E.PionConnectionError, ConnectionError)
    with pytest.raises(rex.RedisError):
        raise E.error_from_reply("OOM x")


@pytest.mark.parametrize("exc, cls, code", [
    (rex.ResponseError("syntax error"), E.CommandError, "ERR"),  # redis-py strips ERR
    (rex.ResponseError("NOSESSION session not found"), E.SessionNotFoundError, "NOSESSION"),
    (rex.ResponseError("NOKVCACHE V-store not enabled"), E.NotEnabledError, "NOKVCACHE"),
    (rex.ResponseError("NOPERSIST persistence is not enabled"), E.PersistenceNotEnabledError,
     "NOPERSIST"),
    (rex.ResponseError("session not found"), E.CommandError, "ERR"),
    (rex.ResponseError("OOM command not allowed"), E.OutOfMemoryError, "OOM"),
    (rex.ResponseError("COLDMISS session evicted"), E.ColdMissError, "COLDMISS"),
    (rex.ResponseError("WRONGPASS invalid username-password pair"), E.WrongPassError,
     "WRONGPASS"),
    (rex.ResponseError("NOPROTO unsupported protocol version"), E.NoProtoError, "NOPROTO"),
    (rex.ResponseError("WRONGTYPE Operation against a key"), E.CommandError, "WRONGTYPE"),
    (rex.ResponseError("AUTH <password> called without any password"), E.CommandError, "ERR"),
    (rex.BusyLoadingError("pion is loading"), E.LoadingError, "LOADING"),
    (rex.AuthenticationError("Authentication required."), E.NoAuthError, "NOAUTH"),
    (rex.AuthenticationError("Client sent AUTH, but no password is set"), E.CommandError, "ERR"),
    (rex.AuthenticationWrongNumberOfArgsError("wrong number of arguments for 'auth' command"),
     E.WrongArityError, "ERR"),
    (rex.NoPermissionError("this user has no permissions"), E.CommandError, "NOPERM"),
    (rex.ConnectionError("refused"), E.PionConnectionError, "CONNECTION"),
    (rex.TimeoutError("timed out"), E.PionConnectionError, "CONNECTION"),
    (OSError("reset"), E.PionConnectionError, "CONNECTION"),
    (rex.DataError("bad argument"), E.ClientError, "CLIENT"),
])
def test_translate_redis_py(exc, cls, code):
    e = E.translate(exc)
    assert type(e) is cls and e.code == code


def test_every_class_with_a_code_word_is_chosen_by_it():
    # Each server code word a class names maps back to that class, with any text.
    for name in E.__all__:
        cls = getattr(E, name)
        if not (isinstance(cls, type) and issubclass(cls, E.PionError)):
            continue
        if cls.code in ("ERR", "CLIENT", "CONNECTION") or "code" not in vars(cls):
            continue
        e = E.error_from_reply(f"{cls.code} any words at all")
        assert type(e) is cls and e.code == cls.code and e.message == "any words at all"


def test_translate_keeps_pion_errors():
    e = E.ColdMissError("x")
    assert E.translate(e) is e


def test_package_exports_every_error_class():
    classes = {n for n in E.__all__ if n.endswith("Error")}
    assert classes <= set(pion.__all__)
    for n in classes:
        assert getattr(pion, n) is getattr(E, n)


def test_stage2_is_a_deprecated_alias_of_server_attention():
    # Constructing the cache does not connect (redis-py connects on the first command).
    with pytest.warns(DeprecationWarning, match="server_attention"):
        c = pion.PionPromptCache(stage2=True, n_layers=1, n_kv_heads=1, head_dim=8)
    assert c.server_attention is True
    with pytest.warns(DeprecationWarning):
        assert c.stage2 is True
    assert pion.PionPromptCache(server_attention=True, n_layers=1, n_kv_heads=1,
                                head_dim=8).server_attention is True
