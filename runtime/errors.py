"""The one root of every exception mobagent raises.

A program that embeds the runtime catches ``MobagentError`` to mean "anything mobagent
raised"; the specific classes (``DeviceError``, ``LLMError``, ``BusError``, ...) derive from
it and keep the builtin base they had, so ``except ValueError`` around a config load still
works. This module imports nothing, so every package may import it (the boundary test
allows it as a leaf, as it does ``devices.codecs``).
"""


class MobagentError(Exception):
    """Something mobagent raised on purpose; the subclass says what failed."""
