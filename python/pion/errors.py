"""Exceptions of the pion client, named after the server's error code words.

pion-server answers errors as RESP error lines ``-<CODE> <text>``. The code word
is the part to branch on; the text is for people and may be reworded at any
time (docs/protocol.md "Error code words"). Every such reply becomes a subclass
of :class:`PionError` carrying ``code`` (the code word) and ``message`` (the
text after it), and the class is chosen by the code word alone: pion gives each
failure a client must tell apart a word of its own (``NOSESSION``,
``NOKVCACHE``, ``NOPERSIST`` next to Redis's ``OOM``, ``LOADING``, ...). The one
exception is two ``-ERR`` texts that Redis itself defines and keeps stable,
``unknown command '...`` and ``wrong number of arguments for '...``, which pion
answers exactly as Redis does: they are told apart by their Redis prefix.
:class:`PionError` derives from ``redis.exceptions.RedisError``, so code that
catches redis-py's errors catches pion's too. redis-py's own exception classes
(``ResponseError``, ``BusyLoadingError``, ``AuthenticationError``,
``ConnectionError``...) never escape the public API: :func:`translate` maps them,
taking the code word from the class redis-py chose (it strips the words it knows)
or from the text (it keeps the others).

Hierarchy::

    redis.exceptions.RedisError
    └── PionError
    ├── CommandError              -ERR ... (generic), and code words without a class
    │   │                          of their own (-WRONGTYPE, -NOPERM, -MOVED ...)
    │   ├── SessionNotFoundError   -NOSESSION session not found
    │   ├── NotEnabledError        -NOKVCACHE V-store not enabled (use --kvcache)
    │   ├── PersistenceNotEnabledError  -NOPERSIST persistence is not enabled
    │   ├── UnknownCommandError    -ERR unknown command '...'       (Redis's text)
    │   └── WrongArityError        -ERR wrong number of arguments for '...'  (Redis's text)
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

import re

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


class PionError(rex.RedisError):
    """Base class of every error raised by the pion client.

    Attributes:
        code: the server's error code word (``"ERR"``, ``"OOM"``, ...), or
            ``"CLIENT"`` / ``"CONNECTION"`` for errors raised on this side.
        message: the error text without the code word.
    """

    code: str = "ERR"

    def __init__(self, message: str = "", code: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.code} {message}".strip())


class CommandError(PionError):
    """``-ERR <text>``: the server refused the command (bad argument, wrong state...)."""

    code = "ERR"


class SessionNotFoundError(CommandError):
    """``-NOSESSION session not found``: the V-store session id does not exist."""

    code = "NOSESSION"


class NotEnabledError(CommandError):
    """``-NOKVCACHE V-store not enabled (use --kvcache)``: the server runs without
    ``--kvcache``."""

    code = "NOKVCACHE"


class PersistenceNotEnabledError(CommandError):
    """``-NOPERSIST persistence is not enabled``: SAVE/COMMIT on a server without
    durability."""

    code = "NOPERSIST"


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


_BY_CODE: dict[str, type[PionError]] = {
    "ERR": CommandError,
    "OOM": OutOfMemoryError,
    "LOADING": LoadingError,
    "NOAUTH": NoAuthError,
    "WRONGPASS": WrongPassError,
    "NOPROTO": NoProtoError,
    "COLDMISS": ColdMissError,
    "NOSESSION": SessionNotFoundError,
    "NOKVCACHE": NotEnabledError,
    "NOPERSIST": PersistenceNotEnabledError,
}

# The two -ERR families Redis defines with a fixed prefix (pion answers them as
# Redis does, so they have no code word of their own): "unknown command '<name>',
# with args beginning with: ..." and "wrong number of arguments for '<cmd>' command".
# Every other -ERR is a plain CommandError, whatever its text.
_ERR_PATTERNS = (
    (re.compile(r"unknown command '"), UnknownCommandError),
    (re.compile(r"wrong number of arguments for '"), WrongArityError),
)
# A code word: capitals (and digits, '_', '-'), as Redis sends them.
_CODE_WORD = re.compile(r"[A-Z][A-Z0-9_-]*\Z")


def error_from_reply(line: str) -> PionError:
    """Builds the exception for a full error line such as ``"OOM command not allowed ..."``.

    The first word is the code word; a line whose first word is not one (a server
    that omits the code) is treated as ``ERR`` with the whole text.
    """
    word, _, rest = line.partition(" ")
    if _CODE_WORD.match(word):
        return from_code(word, rest)
    return from_code("ERR", line)


def from_code(code: str, message: str) -> PionError:
    """The exception for code word ``code`` and the text after it."""
    if code == "ERR":
        cls = next((c for p, c in _ERR_PATTERNS if p.match(message)), CommandError)
        return cls(message)
    by_code = _BY_CODE.get(code)
    return by_code(message) if by_code is not None else CommandError(message, code=code)


def translate(exc: BaseException) -> PionError:
    """Maps a redis-py exception to the matching :class:`PionError`.

    redis-py strips the code word for the codes it knows (``ERR``, ``LOADING``,
    ``NOAUTH``) and keeps the full line for the others (``OOM ...``,
    ``WRONGPASS ...``, ``NOPROTO ...``, ``COLDMISS ...``, ``NOSESSION ...``); both
    shapes are handled.
    """
    if isinstance(exc, PionError):
        return exc
    text = str(exc.args[0]) if exc.args else str(exc)
    code = _redis_py_code(exc, text)
    if code is not None:
        if code == "ERR" or text.partition(" ")[0] != code:
            return from_code(code, text)  # redis-py stripped the word
        return from_code(code, text.partition(" ")[2])
    if isinstance(exc, (rex.ConnectionError, rex.TimeoutError, OSError)):
        return PionConnectionError(text)
    return ClientError(text)


# redis-py's classes for the code words it strips (ERR refinements included).
_REDIS_PY_CODES = (
    (rex.BusyLoadingError, "LOADING"),  # a subclass of its ConnectionError: first
    (rex.AuthenticationWrongNumberOfArgsError, "ERR"),
    (rex.ExecAbortError, "EXECABORT"),
    (rex.ReadOnlyError, "READONLY"),
    (rex.NoScriptError, "NOSCRIPT"),
    (rex.NoPermissionError, "NOPERM"),
)


def _redis_py_code(exc: BaseException, text: str) -> str | None:
    """The code word of a server error redis-py raised (None: not a server reply)."""
    for cls, code in _REDIS_PY_CODES:
        if isinstance(exc, cls):
            return code
    if isinstance(exc, rex.AuthenticationError):
        # redis-py strips NOAUTH, and raises this class for two -ERR texts too.
        if text in ("Client sent AUTH, but no password is set", "invalid password"):
            return "ERR"
        word = text.partition(" ")[0]
        return word if _CODE_WORD.match(word) and word in _BY_CODE else "NOAUTH"
    if isinstance(exc, rex.ResponseError):
        # Words redis-py does not know stay in the text; ERR is stripped.
        word = text.partition(" ")[0]
        return word if _CODE_WORD.match(word) and word != "ERR" and _looks_coded(word) else "ERR"
    return None


def _looks_coded(word: str) -> bool:
    """A first word that is a code word rather than the start of an -ERR text (whose
    texts may begin with a command name in capitals: 'AUTH <password> called ...')."""
    return word in _BY_CODE or word in _OTHER_CODES


# Redis's other code words (src/server.c shared errors, cluster redirects).
_OTHER_CODES = frozenset({"WRONGTYPE", "NOPERM", "EXECABORT", "BUSYKEY", "MOVED", "ASK",
                          "TRYAGAIN", "CROSSSLOT", "CLUSTERDOWN", "NOSCRIPT", "READONLY",
                          "MASTERDOWN", "MISCONF", "BUSY", "NOREPLICAS", "UNBLOCKED",
                          "NOTBUSY", "NOGROUP", "BUSYGROUP"})
