"""``fit --ckpt_path last``: find the newest ``last.ckpt`` of a run and continue in its version folder.

Lightning looks for ``last.ckpt`` only in the checkpoint folder of the *new* run (a fresh ``version_N+1`` when
the checkpoint folder follows the logger), finds none, warns and trains from step 0. :func:`resume_from_last`
searches the run's root instead: every ``ModelCheckpoint`` ``dirpath`` of the config, every logger's
``save_dir`` and the trainer's ``default_root_dir``, all version folders included. It sets ``ckpt_path`` to the
newest ``last.ckpt`` (or ``last-vN.ckpt``) found and pins the loggers' ``version`` to the one that wrote it, so
the metrics, the saved config and (with no fixed ``dirpath``) the checkpoints continue in the same folder.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
import warnings
from pathlib import Path
from typing import Any

from onlstm_tasks.data.core.checkpoint_file import read_checkpoint_file
from onlstm_tasks.errors import ConfigError

from . import csv_history
from .checkpoint import STATE_KEY

log = logging.getLogger(__name__)

LAST_NAME = re.compile(r"last(-v\d+)?\.ckpt")


def resume_from_last(cfg: Any) -> None:
    """If ``cfg.ckpt_path`` is ``"last"`` (a ``fit`` config namespace), replaces it by the newest last checkpoint
    under the run's roots and sets the loggers' version; raises :class:`ConfigError` when there is none."""
    if cfg.get("ckpt_path") != "last":
        return
    roots = search_roots(cfg)
    found = newest_last_checkpoint(roots)
    if found is None:
        where = ", ".join(str(r) for r in roots) or "(no root: set trainer.default_root_dir)"
        raise ConfigError(f"--ckpt_path last: no last.ckpt under {where} (all version folders searched); "
                          f"start the run without --ckpt_path, or pass a checkpoint file")
    checkpoint = read_checkpoint_file(str(found))  # a damaged file: one line
    version, log_dir = run_version(found, checkpoint)
    cfg.ckpt_path = str(found)
    pinned = [_pin_version(logger, version) for logger in _loggers(cfg)] if version is not None else []
    if any(pinned) and log_dir is not None:
        csv_history.set_aside(log_dir)  # Lightning's CSV writer would delete it; restored at checkpoint load
    quiet_reuse_warnings()
    log.info("--ckpt_path last: resuming from %s%s: %s", found,
             f" in version folder {version!r}" if any(pinned) else "", where_it_stopped(checkpoint))


# Lightning's warnings about folders that a resumed run reuses on purpose (the metrics rows it says it will delete
# are set aside and restored: csv_history)
REUSE_WARNINGS = (r"Experiment logs directory .* exists and is not empty",
                  r"Checkpoint directory .* exists and is not empty")


def quiet_reuse_warnings() -> None:
    for pattern in REUSE_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


def where_it_stopped(checkpoint: dict) -> str:
    """``continues after optimizer step 141, in epoch 5 after its first 16 batches`` from a checkpoint's progress
    counters (epochs counted from 0, as Lightning's progress bar shows them)."""
    step, epoch = checkpoint.get("global_step"), checkpoint.get("epoch")
    loaders = (((checkpoint.get("loops") or {}).get("fit_loop") or {}).get("state_dict") or {}).get("combined_loader")
    done = loaders[0].get("batches_done") if isinstance(loaders, list) and loaders and isinstance(loaders[0], dict) \
        else None
    text = f"continues after optimizer step {step}" if step is not None else "continues"
    if isinstance(epoch, int):
        text += f", in epoch {epoch}" + (f" after its first {done} batches" if done else "")
    return text


def search_roots(cfg: Any) -> list[Path]:
    """The checkpoint ``dirpath`` of each callback that has one, each logger's ``save_dir`` and the trainer's
    ``default_root_dir`` (Lightning's default: the working directory's ``lightning_logs``), existing or not."""
    trainer = cfg.trainer
    roots: list[Path] = []
    for callback in trainer.get("callbacks") or []:
        dirpath = _init_args(callback).get("dirpath")
        if dirpath:
            roots.append(Path(dirpath))
    for logger in _loggers(cfg):
        save_dir = _init_args(logger).get("save_dir")
        if save_dir:
            roots.append(Path(save_dir))
    root = trainer.get("default_root_dir")
    roots.append(Path(root) if root else Path.cwd() / "lightning_logs")
    return list(dict.fromkeys(r.resolve() for r in roots))


def newest_last_checkpoint(roots: list[Path]) -> Path | None:
    found = {p for root in roots if root.is_dir() for p in root.rglob("last*.ckpt") if LAST_NAME.fullmatch(p.name)}
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def run_version(path: Path, checkpoint: dict) -> tuple[int | str | None, Path | None]:
    """The logger version and log folder that wrote ``path`` (its contents: ``checkpoint``): recorded by
    :class:`ResumableCheckpoint`, else the ``version_N`` folder of a ``version_N/checkpoints/last.ckpt`` path,
    else ``None`` (unknown)."""
    state = checkpoint.get(STATE_KEY) or {}
    if state.get("logger_version") is not None:
        return state["logger_version"], Path(state["log_dir"]) if state.get("log_dir") else None
    if path.parent.name == "checkpoints" and path.parent.parent.name.startswith("version_"):
        return path.parent.parent.name, path.parent.parent
    return None, None


def _loggers(cfg: Any) -> list[Any]:
    logger = cfg.trainer.get("logger")
    loggers = logger if isinstance(logger, list) else [logger]
    return [x for x in loggers if x is not None and not isinstance(x, bool)]


def _init_args(component: Any) -> Any:
    if isinstance(component, dict) or hasattr(component, "get"):
        return component.get("init_args") or {}
    return {}


def _pin_version(logger: Any, version: int | str) -> bool:
    """Sets ``init_args.version`` of a logger config whose class takes a ``version``; False when it cannot."""
    class_path = logger.get("class_path") if hasattr(logger, "get") else None
    if not class_path:
        return False
    module, _, name = class_path.rpartition(".")
    if "version" not in inspect.signature(getattr(importlib.import_module(module), name)).parameters:
        log.warning("--ckpt_path last: %s takes no version; it logs the resumed run in a new folder", class_path)
        return False
    logger.init_args.version = version
    return True
