"""Exceptions of the pion client, named after the server's error code words.

pion-server answers errors as RESP error lines ``-<CODE> <text>``; the code word
is ``ERR`` unless one of ``OOM``, ``LOADING``, ``NOAUTH``, ``WRONGPASS``,
``NOPROTO`` or ``COLDMISS`` applies (docs/protocol.md "Error code words"). Every such reply becomes a
subclass of :class:`PionError` carrying ``code`` (the code word) and ``message``
(the text after it). redis-py's own exception classes (``ResponseError``,
``BusyLoadingError``, ``AuthenticationError``, ``ConnectionError``...) never
escape the public API: :func:`translate` maps them.

Hierarchy::

    PionError
    ├── CommandError              -ERR ... (generic)
    │   ├── SessionNotFoundError   -ERR session not found
    │   ├── NotEnabledError        -ERR V-store not enabled (use --kvcache)
    │   ├── PersistenceNotEnabledError  -ERR persistence is not enabled
    │   ├── UnknownCommandError    -ERR unknown command '...'
    │   └── WrongArityError        -ERR wrong number of arguments for '...'
    ├── OutOfMemoryError          -OOM
    ├── LoadingError              -LOADING
    ├── NoAuthError               -NOAUTH
    ├── WrongPassError            -WRONGPASS
    ├── NoProtoError              -NOPROTO
    ├── ColdMissError             -COLDMISS
    ├── PionConnectionError       cannot reach the server / connection lost
    │                             (also a builtin ConnectionError)
    └── ClientError               client-side: unexpected reply, incomplete prefix...
        ├── UnexpectedReplyError
        └── IncompletePrefixError
"""
from __future__ import annotations

from typing import Dict, Optional, Type

import redis.exceptions as rex

__all__ = [
    "PionError",
    "CommandError",
    "SessionNotFoundError",
    "NotEnabledError",
    "PersistenceNotEnabledError",
    "UnknownCommandError",
    "WrongArityError",
    "OutOfMemoryError",
    "LoadingError",
    "NoAuthError",
    "WrongPassError",
    "NoProtoError",
    "ColdMissError",
    "PionConnectionError",
    "ClientError",
    "UnexpectedReplyError",
    "IncompletePrefixError",
    "translate",
    "error_from_reply",
]


class PionError(Exception):
    """Base class of every error raised by the pion client.

    Attributes:
        code: the server's error code word (``"ERR"``, ``"OOM"``, ...), or
            ``"CLIENT"`` / ``"CONNECTION"`` for errors raised on this side.
        message: the error text without the code word.
    """

    code: str = "ERR"

    def __init__(self, message: str = "", code: Optional[str] = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.code} {message}".strip())


class CommandError(PionError):
    """``-ERR <text>``: the server refused the command (bad argument, wrong state...)."""

    code = "ERR"


class SessionNotFoundError(CommandError):
    """``-ERR session not found``: the V-store session id does not exist."""


class NotEnabledError(CommandError):
    """``-ERR V-store not enabled (use --kvcache)``: the server runs without ``--kvcache``."""


class PersistenceNotEnabledError(CommandError):
    """``-ERR persistence is not enabled``: SAVE/COMMIT on a server without durability."""


class UnknownCommandError(CommandError):
    """``-ERR unknown command '<name>' ...``: the server does not implement the command."""


class WrongArityError(CommandError):
    """``-ERR wrong number of arguments for '<cmd>' command``."""


class OutOfMemoryError(PionError):
    """``-OOM ...``: a store cannot fit in ``--maxmemory`` even after eviction; nothing changed."""

    code = "OOM"


class LoadingError(PionError):
    """``-LOADING ...``: the server is still loading its snapshot / WAL; retry later."""

    code = "LOADING"


class NoAuthError(PionError):
    """``-NOAUTH ...``: authentication required (or AUTH sent to a server without a password)."""

    code = "NOAUTH"


class WrongPassError(PionError):
    """``-WRONGPASS ...``: the password (or user/password pair) is wrong."""

    code = "WRONGPASS"


class NoProtoError(PionError):
    """``-NOPROTO ...``: HELLO asked for an unsupported protocol version."""

    code = "NOPROTO"


class ColdMissError(PionError):
    """``-COLDMISS ...``: a Stage-2 attention session was demoted to the cold tier."""

    code = "COLDMISS"


class PionConnectionError(PionError, ConnectionError):
    """The server could not be reached, or the connection broke mid-command."""

    code = "CONNECTION"


class ClientError(PionError):
    """An error detected by the client itself (not sent by the server)."""

    code = "CLIENT"


class UnexpectedReplyError(ClientError):
    """The server's reply has a shape or size the client does not expect."""


class IncompletePrefixError(ClientError):
    """A registered prefix has layers or rows missing (e.g. another process is still storing it)."""


_BY_CODE: Dict[str, Type[PionError]] = {
    "ERR": CommandError,
    "OOM": OutOfMemoryError,
    "LOADING": LoadingError,
    "NOAUTH": NoAuthError,
    "WRONGPASS": WrongPassError,
    "NOPROTO": NoProtoError,
    "COLDMISS": ColdMissError,
}

# (prefix of the text after "ERR ", class): refinements of -ERR.
_ERR_PREFIXES = (
    ("session not found", SessionNotFoundError),
    ("V-store not enabled", NotEnabledError),
    ("persistence is not enabled", PersistenceNotEnabledError),
    ("unknown command", UnknownCommandError),
    ("wrong number of arguments", WrongArityError),
)


def error_from_reply(line: str) -> PionError:
    """Builds the exception for a full error line such as ``"OOM command not allowed ..."``.

    The first word is the code word when it is one of the known ones; anything
    else (a server that omits the code) is treated as ``ERR`` with the whole text.
    """
    word, _, rest = line.partition(" ")
    if word in _BY_CODE:
        return _from_code(word, rest)
    return _from_code("ERR", line)


def _from_code(code: str, message: str) -> PionError:
    if code == "ERR":
        for prefix, cls in _ERR_PREFIXES:
            if message.startswith(prefix):
                return cls(message)
        return CommandError(message)
    return _BY_CODE[code](message)


def translate(exc: BaseException) -> PionError:
    """Maps a redis-py exception to the matching :class:`PionError`.

    redis-py strips the code word for the codes it knows (``ERR``, ``LOADING``,
    ``NOAUTH``) and keeps the full line for the others (``OOM ...``,
    ``WRONGPASS ...``, ``NOPROTO ...``, ``COLDMISS ...``); both shapes are handled.
    """
    if isinstance(exc, PionError):
        return exc
    text = str(exc.args[0]) if exc.args else str(exc)
    if isinstance(exc, rex.BusyLoadingError):  # subclass of ConnectionError: test first
        return LoadingError(text)
    if isinstance(exc, rex.AuthenticationWrongNumberOfArgsError):
        return WrongArityError(text)
    if isinstance(exc, rex.AuthenticationError):
        # -NOAUTH ... (code stripped by redis-py) or -ERR Client sent AUTH, but no password...
        if text.startswith("WRONGPASS"):
            return WrongPassError(text.partition(" ")[2])
        if text.startswith("Client sent AUTH"):  # -ERR: AUTH without a configured password
            return CommandError(text)
        return NoAuthError(text)
    if isinstance(exc, rex.ResponseError):
        word = text.partition(" ")[0]
        if word in _BY_CODE and word != "ERR":
            return _from_code(word, text.partition(" ")[2])
        return _from_code("ERR", text)
    if isinstance(exc, (rex.ConnectionError, rex.TimeoutError, OSError)):
        return PionConnectionError(text)
    if isinstance(exc, rex.RedisError):
        return ClientError(text)
    return ClientError(text)
