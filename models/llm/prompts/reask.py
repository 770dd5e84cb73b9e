"""Asking until a reply parses: on a ``ParseError`` the model is re-asked with the error, at
most N times; the result is a parsed value or ``UnparsableReply``, never unparsed text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from models.llm.errors import ParseError, UnparsableReply
from models.llm.messages import ChatMessage, ChatModel, LLMReply, Role

T = TypeVar("T")


@dataclass(frozen=True)
class Parsed(Generic[T]):
    value: T
    replies: tuple[LLMReply, ...]  # every call made, re-asks included: emit each as an event
    errors: tuple[str, ...]  # the parse errors that caused re-asks


REASK_TEMPLATE = (
    "That reply could not be used: {error}\n"
    "Answer again, following the required format exactly."
)


class ReplyFormat(Protocol):
    """How a role's family asks for an answer and reads it back
    (``models.llm.families.answers.AnswerFormat``): request options, and the reply as the
    text the line parser reads."""

    @property
    def options(self) -> Mapping[str, Any]: ...

    def text(self, reply: LLMReply) -> str: ...


async def ask_until_read(
    llm: ChatModel,
    role: Role,
    messages: Sequence[ChatMessage],
    read: Callable[[LLMReply], T],
    *,
    said: Callable[[LLMReply], str],
    options: Mapping[str, Any] | None = None,
    max_reasks: int = 2,
    who: str = "",
) -> Parsed[T]:
    """Call, ``read`` the reply; on ``ParseError`` re-ask with the error, at most
    ``max_reasks`` times.

    Each re-ask is the original prompt plus the last bad reply (as ``said`` quotes it) and
    the error (not every earlier one, to keep the prompt small). Raises ``UnparsableReply``
    (naming ``who``, else the role) when the budget runs out, and ``LLMError`` from the
    client as is; it never returns an unread reply. ``options``: request parameters of the
    role's family (None or empty: none are sent, and a plain ``ChatModel`` suffices).
    """
    replies: list[LLMReply] = []
    errors: list[str] = []
    convo = list(messages)
    for _ in range(max(max_reasks, 0) + 1):
        reply = await (llm.chat(role, convo, options=options) if options
                       else llm.chat(role, convo))
        replies.append(reply)
        try:
            value = read(reply)
        except ParseError as exc:
            errors.append(exc.message)
            convo = [
                *messages,
                ChatMessage.text("assistant", said(reply)),
                ChatMessage.text("user", REASK_TEMPLATE.format(error=exc.message)),
            ]
            continue
        return Parsed(value, tuple(replies), tuple(errors))
    raise UnparsableReply(
        f"{who or role}: no usable reply after {len(replies)} tries; last problem: {errors[-1]}",
        errors=tuple(errors),
        replies=tuple(replies),
    )


async def ask_until_parsed(
    llm: ChatModel,
    role: Role,
    messages: Sequence[ChatMessage],
    parse: Callable[[str], T],
    *,
    max_reasks: int = 2,
    answer: ReplyFormat | None = None,
) -> Parsed[T]:
    """``ask_until_read`` for a line parser: ``parse`` reads the reply's text. ``answer``:
    the role's family's format (its request options; its reply read back as the text
    ``parse`` takes); None: the plain prompt and the reply's text."""

    def text(reply: LLMReply) -> str:
        return answer.text(reply) if answer is not None else reply.text

    return await ask_until_read(
        llm, role, messages, lambda reply: parse(text(reply)),
        said=lambda reply: text(reply) or reply.text,
        options=answer.options if answer is not None else None, max_reasks=max_reasks,
    )
