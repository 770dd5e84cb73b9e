"""A small POSIX-style shell language: quoting, `$?`, `;` `&&` `||` `|`, and redirections.

Only what device shell lines from adb clients need. Quoting follows POSIX sh (what
`shlex.quote` produces round-trips exactly), and an operator or `$` inside quotes is
only ever literal text, so a typed string can never start another command.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OPERATORS = ("&&", "||", ";", "|", "&", "\n")
SH = "/system/bin/sh"


class ShellSyntaxError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Var:
    name: str


Part = str | Var


@dataclass(slots=True)
class Word:
    parts: list[Part] = field(default_factory=list)

    def expand(self, env: dict[str, str]) -> str:
        return "".join(p if isinstance(p, str) else env.get(p.name, "") for p in self.parts)


@dataclass(frozen=True, slots=True)
class Op:
    text: str


@dataclass(frozen=True, slots=True)
class Redirect:
    fd: int  # 0, 1 or 2
    mode: str  # ">", ">>", "<", ">&"
    target: Word


@dataclass(slots=True)
class SimpleCommand:
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)


Pipeline = list[SimpleCommand]


@dataclass(frozen=True, slots=True)
class Step:
    connector: str  # ";" for the first step, else the operator before it
    pipeline: Pipeline


_VAR_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_VAR_BODY = _VAR_START | set("0123456789")
_SPECIAL_VARS = set("?$#!0123456789")
_DQ_ESCAPABLE = set('$`"\\\n')


def _read_var(line: str, i: int, word: Word) -> int:
    """At line[i] == '$': append a Var (or a literal '$') to word; return the next index."""
    j = i + 1
    if j < len(line) and line[j] in _SPECIAL_VARS:
        word.parts.append(Var(line[j]))
        return j + 1
    if j < len(line) and line[j] == "{":
        end = line.find("}", j)
        if end == -1:
            raise ShellSyntaxError("${: bad substitution")
        word.parts.append(Var(line[j + 1 : end]))
        return end + 1
    if j < len(line) and line[j] in _VAR_START:
        k = j
        while k < len(line) and line[k] in _VAR_BODY:
            k += 1
        word.parts.append(Var(line[j:k]))
        return k
    word.parts.append("$")
    return j


def tokenize(line: str) -> list[Word | Op]:
    tokens: list[Word | Op] = []
    word: Word | None = None
    i, n = 0, len(line)

    def cur() -> Word:
        nonlocal word
        if word is None:
            word = Word()
        return word

    def flush() -> None:
        nonlocal word
        if word is not None:
            tokens.append(word)
            word = None

    while i < n:
        c = line[i]
        if c in " \t":
            flush()
            i += 1
        elif c == "#" and word is None:
            nl = line.find("\n", i)
            i = n if nl == -1 else nl
        elif c == "'":
            end = line.find("'", i + 1)
            if end == -1:
                raise ShellSyntaxError("unterminated quoted string")
            cur().parts.append(line[i + 1 : end])
            i = end + 1
        elif c == '"':
            w = cur()
            w.parts.append("")  # "" is an empty word, not no word
            i += 1
            while True:
                if i >= n:
                    raise ShellSyntaxError("unterminated quoted string")
                d = line[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < n and line[i + 1] in _DQ_ESCAPABLE:
                    if line[i + 1] != "\n":
                        w.parts.append(line[i + 1])
                    i += 2
                elif d == "$":
                    i = _read_var(line, i, w)
                elif d == "`":
                    raise ShellSyntaxError("command substitution is not supported")
                else:
                    w.parts.append(d)
                    i += 1
        elif c == "\\":
            if i + 1 < n:
                if line[i + 1] != "\n":
                    cur().parts.append(line[i + 1])
                i += 2
            else:
                i += 1
        elif c == "$":
            if line.startswith("$(", i):
                raise ShellSyntaxError("command substitution is not supported")
            i = _read_var(line, i, cur())
        elif c == "`":
            raise ShellSyntaxError("command substitution is not supported")
        elif c in ";&|\n":
            flush()
            two = line[i : i + 2]
            if two in ("&&", "||"):
                tokens.append(Op(two))
                i += 2
            else:
                tokens.append(Op(c))
                i += 1
        elif c in "<>":
            # an all-digit word right before > or < is the fd number ("2>", "2>&1")
            fd = 0 if c == "<" else 1
            if word is not None and all(isinstance(p, str) for p in word.parts):
                text = "".join(p for p in word.parts if isinstance(p, str))
                if text in ("0", "1", "2") and line[i - 1] == text:
                    fd = int(text)
                    word = None
            flush()
            if line.startswith(">>", i):
                op, i = ">>", i + 2
            elif line.startswith(">&", i) or line.startswith("<&", i):
                op, i = ">&", i + 2
            else:
                op, i = c, i + 1
            tokens.append(Op(f"{fd}{op}"))
        else:
            cur().parts.append(c)
            i += 1
    flush()
    return tokens


def parse(line: str) -> list[Step]:
    """Parse a shell line into steps joined by ; && || (each a pipeline of simple commands)."""
    steps: list[Step] = []
    connector = ";"
    pipeline: Pipeline = []
    cmd = SimpleCommand()
    tokens = tokenize(line)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if isinstance(tok, Word):
            cmd.words.append(tok)
        elif tok.text[0].isdigit():  # a redirection: fd + op, then its target word
            target = tokens[i + 1] if i + 1 < len(tokens) else None
            if not isinstance(target, Word):
                raise ShellSyntaxError("syntax error: redirection without a target")
            cmd.redirects.append(Redirect(int(tok.text[0]), tok.text[1:], target))
            i += 1
        elif tok.text == "|":
            if not (cmd.words or cmd.redirects):
                raise ShellSyntaxError("syntax error: '|' unexpected")
            pipeline.append(cmd)
            cmd = SimpleCommand()
        else:
            if cmd.words or cmd.redirects:
                pipeline.append(cmd)
                cmd = SimpleCommand()
            elif pipeline or tok.text in ("&&", "||"):
                raise ShellSyntaxError(f"syntax error: '{tok.text.strip()}' unexpected")
            if pipeline:
                steps.append(Step(connector, pipeline))
                pipeline = []
            connector = tok.text if tok.text in ("&&", "||") else ";"
        i += 1
    if cmd.words or cmd.redirects:
        pipeline.append(cmd)
    elif pipeline or connector != ";":
        raise ShellSyntaxError("syntax error: unexpected end of file")
    if pipeline:
        steps.append(Step(connector, pipeline))
    return steps
