"""The command line: ``onlstm-tasks`` (:mod:`.console`, the console script, which answers ``--help`` and ``--version``
without importing Lightning), the Lightning CLI behind its subcommands (:mod:`.lightning_cli`), the checks of a
config before any training (:mod:`.config_checks`), the config's own help (:mod:`.config_help`), the parser's
messages in one line (:mod:`.config_messages`), and the package's logs and known warnings (:mod:`.package_logs`,
:mod:`.known_warnings`). The top of the layer order (DESIGN.md): nothing in the package imports it."""

from .console import SUBCOMMANDS, main

__all__ = ["SUBCOMMANDS", "main"]
