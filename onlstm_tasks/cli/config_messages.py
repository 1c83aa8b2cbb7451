"""jsonargparse's configuration errors cut to the one line a user acts on: which key, what was wrong, what to write.

jsonargparse reports a bad ``--model.init_args...`` value as a nested tree: every Union subtype it tried, at every
level of ``class_path``/``init_args``, each with the whole given value (a vocabulary of thousands of words, once).
These functions read that text and name the full key, what it expected and, for a typo, the nearest accepted key.
Pure text functions: the CLI (:mod:`onlstm_tasks.cli`) calls them from its parser's ``error``.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Iterable

MAX_LENGTH = 300  # a reason longer than this is cut (it holds a dumped value)

# type names of "Expected a <class 'int'>" in the words of a YAML user
TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
              "dict": "a mapping", "list": "a list", "tuple": "a list"}


def accepted_keys(class_path: str) -> list[str]:
    """The constructor arguments of the class at ``class_path`` (empty when it cannot be imported), those a
    ``**kwargs`` hands on to a base class's constructor included (as jsonargparse follows them)."""
    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(__import__(module, fromlist=[name]), name)
    except (ImportError, AttributeError):
        return []
    keys: list[str] = []
    for klass in getattr(cls, "__mro__", ()):
        if "__init__" not in vars(klass):
            continue
        try:
            params = list(inspect.signature(klass.__init__).parameters.values())[1:]  # not self
        except (TypeError, ValueError):
            break
        keys += [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in keys]
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return keys


def classes_taking(key: str, class_path: str) -> list[str]:
    """The names of the classes beside ``class_path`` (those its package ``onlstm_tasks.<part>`` exports) whose
    constructor takes ``key``: ``["ONLSTM"]`` for ``chunk_size`` beside ``onlstm_tasks.encoders.GRU``."""
    parts = class_path.split(".")
    if parts[0] != "onlstm_tasks" or len(parts) < 3:
        return []
    package = ".".join(parts[:2])
    try:
        names = getattr(__import__(package, fromlist=["__all__"]), "__all__", [])
    except ImportError:
        return []
    return [name for name in names if name != parts[-1] and key in accepted_keys(f"{package}.{name}")]


def did_you_mean(key: str, accepted: list[str], class_path: str = "") -> str:
    """``; did you mean `nearest`?``; where another class of the package takes ``key`` (an encoder swapped for one
    with other options), that it belongs to it; else the accepted keys (empty without any)."""
    owners = classes_taking(key, class_path) if class_path else []
    if owners:
        name = class_path.rsplit(".", 1)[-1]
        return (f": an option of {', '.join(owners[:3])}, not of {name}; delete it (with another encoder, check "
                f"each of its options: {name} takes {', '.join(accepted)})")
    close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.75)
    if close:
        return f"; did you mean `{close[0]}`?"
    return f" (accepted: {', '.join(accepted)})" if accepted else ""


def short_parser_message(message: str, accepted_options: Iterable[str] = ()) -> str:
    """jsonargparse's error ``message`` cut to what the user must change. ``accepted_options``: the parser's own
    option keys (``trainer.max_epochs``, ...), for the nearest key of an unknown top-level one."""
    required = re.search(r"arguments are required: (\w+)\.(model|data)\b", message)
    if required:
        sub = required.group(1)
        return (f"{sub} needs a model and data: give a config (onlstm-tasks {sub} --config configs/quickstart.yaml)"
                f" or --model and --data")
    class_paths = re.findall(r"class_path(?:=| )'([^']+)'", message)
    parents = re.findall(r'Parser key "([^"]+)"', message)
    option = re.search(r"Option '([^']+)' is not accepted", message)
    nested = re.search(r"unrecognized arguments: -*([\w.]+)", message, re.IGNORECASE)
    if class_paths and (option or nested):
        # a key a class does not take: the typo is its first part (`encodr` of `encodr.init_args.hidden_size`)
        key = option.group(1) if option else nested.group(1).split(".", 1)[0]
        class_path = class_paths[-1]
        where = ".init_args.".join(parents) + ".init_args" if parents else class_path
        return (f"unknown key `{key}` in {where} ({class_path.rsplit('.', 1)[-1]})"
                f"{did_you_mean(key, accepted_keys(class_path), class_path)}")
    unknown = re.search(r"(?:Key '|Unrecognized arguments: -*)([\w.]+)", message, re.IGNORECASE)
    if unknown:
        key = unknown.group(1)
        parent, _, leaf = key.rpartition(".")
        siblings = [a.rpartition(".")[2] for a in accepted_options if a.rpartition(".")[0] == parent]
        close = difflib.get_close_matches(leaf, siblings, n=1, cutoff=0.75)
        hint = f"; did you mean `{parent + '.' if parent else ''}{close[0]}`?" if close else ""
        return f"unknown key `{key}`{hint}"
    if parents:
        return bad_value_message(message, parents)
    return short_union_message(message)


def bad_value_message(message: str, parents: list[str]) -> str:
    """A value of the wrong type: the full key (``--data.init_args.reader_options``), what it takes and what it
    got; a mapping or list given as text that YAML did not read (``{scheme:iob1}``: no space after the colon) gets
    the YAML form to write."""
    key = ".init_args.".join(parents)
    innermost = message[message.rfind(f'Parser key "{parents[-1]}"'):]
    expected = [m.group(1) for m in re.finditer(r"Expected an? (.+?)(?:\. Got value:.*)?$", innermost, re.MULTILINE)
                if "NoneType" not in m.group(1)]
    given = re.search(r"(?:Given|Got) value: (.*?)(?:\. Got value:.*)?$", innermost, re.MULTILINE)
    value = given.group(1).strip() if given else None
    if not expected:
        return f"--{key}: {short_union_message(innermost)}"
    words = [TYPE_WORDS.get(_type_name(e), _type_name(e)) for e in expected]
    text = f"--{key}: expected {' or '.join(dict.fromkeys(words))}"
    nested = re.fullmatch(r"NestedArg\(key='([^']*)', val=.*\)", value or "")
    if nested:
        text += f", got the nested key `{nested.group(1)}` (it takes no init_args)"
        value = None
    elif value is not None:
        text += f", got {value!r}"
    if value and {"a mapping", "a list"} & set(words) and value[:1] in "{[" and ":" in value:
        fixed = re.sub(r":(?=\S)", ": ", value)
        text += f" (YAML needs a space after each colon: --{key} '{fixed}')"
    elif value and "a mapping" in words:
        text += f" (write a YAML mapping: --{key} '{{name: value}}')"
    return text if len(text) <= MAX_LENGTH else text[: MAX_LENGTH - 3] + "..."


def _type_name(expected: str) -> str:
    """``int`` from ``<class 'int'>``; the text itself for anything else (``typing.Literal['cnn', 'lstm']``)."""
    match = re.fullmatch(r"<class '(\w+)'>", expected.strip())
    if match:
        return match.group(1)
    literal = re.fullmatch(r"typing\.Literal\[(.*)\]", expected.strip())
    return f"one of {literal.group(1)}" if literal else expected.strip()


def short_union_message(message: str) -> str:
    """The innermost reasons of a jsonargparse Union report, without the ``Given value`` dumps."""
    reasons = [line.strip(" -") for line in message.splitlines()
               if line.strip().startswith("- ") and "Expected a <class 'NoneType'>" not in line
               and "Does not validate" not in line]
    reasons = [r for r in reasons if "Problem with given class_path" not in r] or reasons
    first = message.strip().splitlines()[0] if message.strip() else "invalid configuration"
    text = "; ".join(dict.fromkeys(reasons)) if reasons else first
    return text if len(text) <= MAX_LENGTH else text[: MAX_LENGTH - 3] + "..."
