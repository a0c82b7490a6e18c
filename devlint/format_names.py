"""The names ``--output-format`` accepts, apart from the formats themselves: the command line
reads them to build its parser, and importing :mod:`devlint.formats` (with the finding
classes and dataclasses) only for ``--version`` or ``--help`` cost a third of the start-up."""

#: The format names ``--output-format`` accepts, in the order ``--help`` lists them.
NAMES = ("full", "concise", "json", "json-devlint", "sarif", "github", "gitlab")
#: Older names still accepted: ``text`` is the one-line-a-finding format.
ALIASES = {"text": "concise"}
