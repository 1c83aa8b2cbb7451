"""``onlstm-tasks fit --help --config X.yaml``: the options a user sets in that config, read without importing
torch or Lightning (seconds each), so the help prints at once.

Every ``class_path`` of the config (the model, and in it the embedder, the encoder, the optimizer; the data module)
is listed with its constructor's arguments: the config's value (else the default) and the first sentence of the
argument's entry in the class docstring's ``Args:`` section. The package's classes are read from their source
(:mod:`ast`); a class from elsewhere (``torch.optim.Adam``, Lightning's loggers) shows the config's values only.
Lightning's own trainer options: ``--help-trainer`` (LightningCLI's full help).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..tasks.registry import DATA_FACTS  # noqa: F401 - the facts the help leaves out, re-exported for the CLI

PACKAGE = "onlstm_tasks"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
WIDTH = 118


@dataclass
class Argument:
    name: str
    default: str | None  # the source text of the default; None: required
    doc: str


def config_files(argv: list[str]) -> list[str]:
    """The files given by ``--config X`` / ``--config=X`` / ``-c X`` in ``argv``."""
    files = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("--config", "-c")]
    return files + [arg.split("=", 1)[1] for arg in argv if arg.startswith("--config=")]


def _module_file(module: str) -> Path | None:
    if module != PACKAGE and not module.startswith(PACKAGE + "."):
        return None
    base = PACKAGE_DIR.joinpath(*module.split(".")[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _resolve(module: str, relative: ast.ImportFrom) -> str:
    if not relative.level:
        return relative.module or ""
    parts = module.split(".")
    is_package = _module_file(module) is not None and _module_file(module).name == "__init__.py"
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - relative.level + 1]
    return ".".join(base + ([relative.module] if relative.module else []))


def find_class(class_path: str, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
    """``(module, class node)`` of a class of the package, following re-exports (``from ..rnn import GRU``)."""
    module, _, name = class_path.rpartition(".")
    file = _module_file(module)
    if file is None or depth > 5:
        return None
    tree = ast.parse(file.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, node
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return find_class(f"{_resolve(module, node)}.{alias.name}", depth + 1)
    return None


def _imported_names(module: str) -> dict[str, str]:
    file = _module_file(module)
    names: dict[str, str] = {}
    for node in ast.parse(file.read_text()).body if file else []:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{_resolve(module, node)}.{alias.name}"
    return names


def arguments(class_path: str) -> list[Argument] | None:
    """The constructor arguments of a package class with their defaults and docs (its own ``__init__``, else the
    first base of the package that has one; an ``__init__`` with ``**kwargs`` adds its base's, as jsonargparse
    follows them); None for a class outside the package."""
    found = find_class(class_path)
    if found is None:
        return None
    module, node = found
    docs = argument_docs(ast.get_docstring(node) or "")
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            args = item.args
            positional = args.posonlyargs + args.args
            defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
            pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
            own = [Argument(a.arg, None if d is None else ast.unparse(d), docs.get(a.arg, ""))
                   for a, d in pairs if a.arg != "self"]
            if args.kwarg is None:
                return own
            names = {a.name for a in own}
            return own + [a for a in _base_arguments(module, node, docs) or [] if a.name not in names]
    return _base_arguments(module, node, docs)


def _base_arguments(module: str, node: ast.ClassDef, docs: dict[str, str]) -> list[Argument] | None:
    """The arguments of the first base of ``node`` that has any (docs from ``docs`` first); None for a base from
    elsewhere (Lightning's ModelCheckpoint: its arguments are unknown here)."""
    imports = _imported_names(module)
    for base in node.bases:
        name = ast.unparse(base)
        inherited = arguments(imports.get(name, f"{module}.{name}"))
        if inherited is None:  # a base from elsewhere (Lightning's ModelCheckpoint): its arguments are unknown here
            return None
        if inherited:
            return [Argument(a.name, a.default, docs.get(a.name, a.doc)) for a in inherited]
    return []


def argument_docs(docstring: str) -> dict[str, str]:
    """``{name: first sentence}`` from a Google-style ``Args:`` section (``a, b: text`` documents both)."""
    docs: dict[str, str] = {}
    lines = docstring.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() in ("Args:", "Arguments:", "Parameters:"))
    except StopIteration:
        return docs
    indent, names, text = None, [], []

    def close() -> None:
        sentence = re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join(text).strip(), maxsplit=1)[0]
        for name in names:
            docs[name] = re.sub(r":\w+:`~?([^`]+)`", r"\1", sentence).replace("``", "")

    for line in lines[start + 1:]:
        if not line.strip():
            continue
        current = len(line) - len(line.lstrip())
        if indent is None:
            indent = current
        if current < indent:
            break
        entry = re.match(r"\s*([\w, ]+):\s*(.*)", line) if current == indent else None
        if entry:
            close()
            names = [n.strip() for n in entry.group(1).split(",")]
            text = [entry.group(2)]
        else:
            text.append(line.strip())
    close()
    return docs


def class_nodes(node: Any, key: str) -> Iterator[tuple[str, str, dict, int]]:
    """``(option key, class_path, init_args, depth)`` of each ``class_path`` node of a config, outermost first."""
    if isinstance(node, dict):
        if isinstance(node.get("class_path"), str):
            yield key, node["class_path"], node.get("init_args") or {}, key.count(".init_args.")
        for child, value in node.items():
            if child != "class_path":
                yield from class_nodes(value, f"{key}.{child}" if key else child)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from class_nodes(value, f"{key}[{index}]")


def _value(value: Any) -> str:
    if isinstance(value, dict) and "class_path" in value:
        return value["class_path"].rsplit(".", 1)[-1]
    text = str(value).replace("\n", " ")
    return text if len(text) <= 40 else text[:37] + "..."


def describe_class(key: str, class_path: str, init_args: dict, depth: int) -> list[str]:
    pad = "  " * depth
    lines = [f"{pad}{key}: {class_path}"]
    known = arguments(class_path)
    if known is None:  # not ours: the config's values only
        rows = [(f"--{key}.init_args.{name}", _value(value), "") for name, value in init_args.items()]
    else:
        rows = [(f"--{key}.init_args.{a.name}",
                 _value(init_args[a.name]) if a.name in init_args else (a.default or "(required)"), a.doc)
                for a in known if a.name not in DATA_FACTS and a.name != "input_size"]
    if not rows:
        return lines
    width = max(len(option) for option, _, _ in rows)
    value_width = min(max(len(value) for _, value, _ in rows), 24)
    for option, value, doc in rows:
        head = f"{pad}  {option:<{width}}  {value:<{value_width}}"
        room = WIDTH - len(head) - 2
        lines.append(f"{head}  {textwrap.shorten(doc, max(room, 30), placeholder=' ...')}".rstrip())
    return lines


def help_text(subcommand: str, argv: list[str]) -> str:
    """The help of ``onlstm-tasks SUBCOMMAND --help [--config X.yaml]``."""
    import yaml

    files = config_files(argv)
    usage = (f"usage: onlstm-tasks {subcommand} --config X.yaml [--KEY VALUE ...] [--print_config] "
             "[--help-trainer]\n")
    if not files:
        configs = sorted(str(p) for p in Path("configs").glob("**/*.yaml"))[:8]
        listed = "".join(f"\n  {c}" for c in configs)
        return (f"{usage}\nThe options of a run are those of its config's classes: onlstm-tasks {subcommand} --help "
                f"--config X.yaml lists them with their values and docs{', e.g. for' if configs else ''}{listed}\n"
                f"\nLightning's trainer options (--trainer.KEY): onlstm-tasks {subcommand} --help-trainer\n")
    config: dict = {}
    for file in files:
        merge(config, yaml.safe_load(Path(file).read_text()) or {})
    lines = [usage, f"Options of {', '.join(files)}: its value (else the default) and what it does; set any with "
                    "--KEY VALUE.", ""]
    for section in ("model", "data"):
        for key, class_path, init_args, depth in class_nodes(config.get(section), section):
            lines += describe_class(key, class_path, init_args, depth)
        lines.append("")
    trainer = config.get("trainer") or {}
    lines.append(f"trainer (Lightning's Trainer; all its options: onlstm-tasks {subcommand} --help-trainer):")
    for name, value in trainer.items():
        if name not in ("callbacks", "logger"):
            lines.append(f"  --trainer.{name:<30} {_value(value)}")
    for key, class_path, init_args, _ in class_nodes({"callbacks": trainer.get("callbacks"),
                                                      "logger": trainer.get("logger")}, "trainer"):
        lines.append(f"  {key}: {class_path} {_value(init_args) if init_args else ''}".rstrip())
    others = {k: v for k, v in config.items() if k not in ("model", "data", "trainer")}
    if others:
        lines += ["", "other options:"] + [f"  --{name:<38} {_value(value)}" for name, value in others.items()]
    return "\n".join(lines) + "\n"


def merge(into: dict, other: dict) -> None:
    """Merges ``other`` into ``into``, mappings key by key (as jsonargparse merges several --config files)."""
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
