"""What every HTTP exchange gets before routing and after the answer (`AnchorApp`): HEAD on a
GET route as the GET without its body; a deadline for the request body (`BodyTimeout`, a 400 that
closes the connection); the unread body drained, up to `drain_limit`, before the answer; one
spelling per path (a trailing slash is 404). Why: docs/explanation/decisions/36-api.md."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from litestar import Litestar, Request
from litestar.handlers import BaseRouteHandler

_ARRIVED_S = 0.5  # past the body's deadline, for what arrived while the process was stopped
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]
AccessLine = Callable[[Scope, int, bytes, float], None]
"""Logs an exchange: (its scope, the status sent (0: none), a refusal's first bytes, its
`time.perf_counter()` at the start)."""

# Refusals are small `{v, error, note}` documents; a larger body is not kept for the log.
MAX_ERROR_BODY = 4096

ORIGINAL_METHOD = "capability_anchor.method"
"""Scope key holding the method the client sent when HEAD was served as GET."""
SENT_PATH = "capability_anchor.path"
"""Scope key holding the decoded path as sent: Litestar strips a trailing slash from
`scope["path"]` when it routes."""


class BodyTimeout(Exception):
    """The request body did not arrive in time."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the request body did not arrive within {seconds:g} s")
        self.seconds = seconds


class OtherSpelling(Exception):
    """A path with a trailing slash: the one spelling of the resource is without it."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"no such resource: {path} is not a path here; its one spelling is "
            f"{path.rstrip('/') or '/'}, without the trailing slash"
        )


def one_spelling(request: Request[Any, Any, Any]) -> None:
    """The check behind `OtherSpelling`. Every route, the OpenAPI pages included, goes
    through it; a redirect would still be a second URL that answers, a 404 is not."""
    path: str = request.scope.get(SENT_PATH, request.scope["path"])  # type: ignore[assignment]
    if path != "/" and path.endswith("/"):
        raise OtherSpelling(path)


def _has_body(headers: list[tuple[bytes, bytes]]) -> tuple[bool, int | None]:
    """(whether a body follows, its Content-Length if given)."""
    for name, value in headers:
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return True, None
            return length > 0, length
        if name == b"transfer-encoding":
            return True, None
    return False, 0


class _Exchange:
    """One request's body bookkeeping: what is still to come, what was read, and whether
    the connection must close after the answer."""

    def __init__(
        self,
        scope: Scope,
        receive: Receive,
        body: tuple[bool, int | None],
        body_timeout: float,
        drain_limit: int,
    ) -> None:
        self._receive = receive
        self.body_timeout = body_timeout
        self.drain_limit = drain_limit
        self.pending, length = body
        self.deadline = asyncio.get_running_loop().time() + body_timeout
        self.late = False
        self.read = 0
        # A client that sent `Expect: 100-continue` sends its body only once asked (uvicorn
        # asks on the app's first read), so an answer given before that is final: nothing
        # to drain.
        self.waits_to_be_asked = self.pending and any(
            n == b"expect" and v.lower() == b"100-continue" for n, v in scope["headers"]
        )
        self.close = length is not None and length > drain_limit

    async def receive(self) -> Message:
        if not self.pending:
            return await self._receive()
        self.waits_to_be_asked = False
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self._receive()
        except TimeoutError:
            message = await self._arrived_meanwhile()
        if message["type"] == "http.request":
            self.read += len(message.get("body", b""))
            self.pending = bool(message.get("more_body", False))
        else:
            self.pending = False
        return message

    async def _arrived_meanwhile(self) -> Message:
        """Past the deadline, once per request: what arrived though this process did not
        read it in time. A process that was stopped (SIGSTOP, a frozen VM) runs its
        expired timers before the reads that came in meanwhile, and would blame a client
        that sent its body at once. `BodyTimeout` if nothing did (a second time at once:
        a trickle gets no more time)."""
        if self.late:
            raise BodyTimeout(self.body_timeout)
        self.late = True
        try:
            async with asyncio.timeout(_ARRIVED_S):
                return await self._receive()
        except TimeoutError:
            raise BodyTimeout(self.body_timeout) from None

    async def drain(self) -> None:
        while self.pending and not self.close:
            if self.read > self.drain_limit:
                self.close = True
                return
            try:
                await self.receive()
            except BodyTimeout:
                self.close = True

    async def start_answer(self, message: Message) -> Message:
        """The `http.response.start` message, once the body is read (or given up on)."""
        if self.waits_to_be_asked:
            self.close = True  # the request is unfinished: the connection cannot be reused
        elif self.pending:
            await self.drain()
        if not (self.close or self.pending):
            return message
        headers = [(k, v) for k, v in message.get("headers", []) if k != b"connection"]
        return dict(message, headers=[*headers, (b"connection", b"close")])


def _request_as_given(handler: BaseRouteHandler) -> None:
    """A handler that takes only `request` gets it from Litestar without its signature
    model, a msgspec conversion that checks nothing for a `Request` and cost ~4 µs a request
    (decisions/37-edge4.md). The model is the same one otherwise (its fields, its name)."""
    model = handler.signature_model
    if model.__struct_fields__ == ("request",):

        def given(cls: Any, connection: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
            return kwargs

        as_given = {"parse_values_from_connection_kwargs": classmethod(given)}
        # A Litestar without this slot keeps its own model: slower, the same answers.
        with contextlib.suppress(AttributeError):
            handler._signature_model = type(model.__name__, (model,), as_given)


class _Answer:
    """One exchange's answer on its way out: the body drained before its start (`_Exchange`),
    HEAD's body dropped, and what its access line needs (the status, a refusal's first bytes),
    seen in the one `send` wrapper the exchange has (decisions/37-edge4.md)."""

    __slots__ = (
        "_send",
        "exchange",
        "head",
        "log",
        "logged",
        "refusal",
        "scope",
        "started",
        "status",
    )

    def __init__(self, send: Send, scope: Scope, log: AccessLine | None) -> None:
        self._send = send
        self.scope = scope
        self.log = log
        self.exchange: _Exchange | None = None
        self.head = False
        self.logged = False
        self.refusal = b""
        self.status = 0
        self.started = time.perf_counter()

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = int(message.get("status", 0))
            if self.exchange is not None:
                message = await self.exchange.start_answer(message)
            await self._send(message)
            return
        if kind != "http.response.body":
            await self._send(message)
            return
        if self.status >= 400 and len(self.refusal) <= MAX_ERROR_BODY:
            self.refusal += message.get("body", b"")[: MAX_ERROR_BODY + 1]
        last = not message.get("more_body", False)
        if self.head:
            message = dict(message, body=b"")
        await self._send(message)
        if last:
            self.done()

    def done(self) -> None:
        """The access line, once: after the last body message, or when the exchange ends
        without one (client gone, error) with the status it got so far (0: none)."""
        if self.log is not None and not self.logged:
            self.logged = True
            self.log(self.scope, self.status, self.refusal, self.started)


class AnchorApp(Litestar):
    """Litestar behind the exchange's guard (HEAD, body deadline, bodies read before answering)
    and its access line (`log_exchange`, set by `web.accesslog.install`): those act before
    routing and after the answer, where Litestar's own middleware cannot. Every route's
    `before_request` (async) starts with `one_spelling`: not a Litestar guard, which would copy
    the route handler on every request (docs/explanation/decisions/37-stack.md)."""

    body_timeout: float = 30.0
    drain_limit: int = 4 * 1024 * 1024
    log_exchange: AccessLine | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        hook = kwargs.get("before_request")

        async def before(request: Request[Any, Any, Any]) -> Any:
            one_spelling(request)
            return None if hook is None else await hook(request)

        kwargs["before_request"] = before
        super().__init__(*args, **kwargs)
        for route in self.routes:
            for handler in getattr(route, "route_handlers", ()):
                _request_as_given(handler)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        scope[SENT_PATH] = scope["path"]
        outward: Send = self._wrap_send(send, scope)  # type: ignore[assignment]
        answer = _Answer(outward, scope, self.log_exchange)
        body = _has_body(scope["headers"])
        if scope["method"] == "HEAD":
            answer.head = True
            scope = answer.scope = dict(scope, method="GET")
            scope[ORIGINAL_METHOD] = "HEAD"
        if answer.head or body[0]:
            answer.exchange = _Exchange(scope, receive, body, self.body_timeout, self.drain_limit)
            receive = answer.exchange.receive
        # What Litestar's own `__call__` does for an HTTP scope, one layer fewer.
        scope["app"] = scope["litestar_app"] = self
        scope.setdefault("state", {})
        handler: ASGIApp = self.asgi_handler
        try:
            await handler(scope, receive, answer.send)
        finally:
            answer.done()
