"""The prompts of the agent's LLM roles, one module a role, each with its reply parser and
its call: ``planner`` (the prompt every family's planner shares), ``chooser``,
``completion``, ``judge``, ``progress``; ``shared``: what several of them show; ``reask``:
asking until a reply parses. The planner's reply formats are the families'
(``models.llm.families``)."""
