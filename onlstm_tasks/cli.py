"""The ``onlstm-tasks`` console script."""

from __future__ import annotations

import sys

from . import __version__


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("--version", "-V"):
        print(f"onlstm-tasks {__version__}")
        return
    print("usage: onlstm-tasks {fit,validate,test,predict} --config CONFIG.yaml\n"
          "       onlstm-tasks --version")


if __name__ == "__main__":
    main()
