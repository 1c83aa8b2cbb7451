"""What a YAML block builds through jsonargparse, as the CLI builds a config's ``class_path`` / ``init_args``."""

from __future__ import annotations

import yaml
from jsonargparse import ArgumentParser


def from_yaml(annotation, config: str | dict):
    """The object ``config`` (a YAML snippet or its mapping) gives for an argument typed ``annotation``."""
    parser = ArgumentParser()
    parser.add_argument("--value", type=annotation)
    spec = yaml.safe_load(config) if isinstance(config, str) else config
    return parser.instantiate(parser.parse_object({"value": spec})).value
