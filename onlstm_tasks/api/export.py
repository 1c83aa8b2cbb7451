"""``onlstm-tasks export --ckpt_path X --out DIR [--push-to-hub REPO]``: a checkpoint as a ``save_pretrained``
folder (config.json, vocabularies and labels as JSON, model.safetensors, README.md model card), optionally pushed
to the Hugging Face Hub."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from onlstm_tasks.tasks.loading import load_for_export

log = logging.getLogger(__name__)


def export(ckpt_path: str | Path, out: str | Path, push_to_hub: str | None = None, private: bool | None = None,
           license: str | None = None) -> str | None:
    """Writes the folder; with ``push_to_hub`` also uploads it to that repo id. Returns the commit URL or None."""
    model = load_for_export(ckpt_path)
    card = {"license": license} if license else {}
    model.save_pretrained(out, model_card_kwargs={**card, "repo_id": push_to_hub} if push_to_hub else card)
    log.info("exported %s to %s", ckpt_path, out)
    if push_to_hub:
        url = model.push_to_hub(push_to_hub, private=private, model_card_kwargs={**card, "repo_id": push_to_hub})
        log.info("pushed to the Hub: %s", url)
        return str(url)
    return None


def out_folder_problem(out: Path, overwrite: bool) -> str | None:
    """What stops writing the export folder ``out``: a file there, or (without ``overwrite``) files already in it."""
    if out.is_file():
        return "is a file; give a folder"
    held = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if held and not overwrite:
        return (f"the folder holds {len(held)} file(s) already ({', '.join(held[:3])}{', ...' if len(held) > 3 else ''})"
                f"; give a new or empty folder, or --overwrite to replace them")
    return None


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="onlstm-tasks export", description=__doc__.replace("``", ""))
    parser.add_argument("--ckpt_path", required=True, help="a checkpoint written by onlstm-tasks fit")
    parser.add_argument("--out", required=True, help="the folder to write")
    parser.add_argument("--push-to-hub", dest="push_to_hub", metavar="REPO", help="also upload to this Hub repo id")
    parser.add_argument("--private", action="store_true", help="create the Hub repo private")
    parser.add_argument("--license", help="licence field of the model card (default: mit)")
    parser.add_argument("--overwrite", action="store_true", help="write into --out even if it holds files already")
    args = parser.parse_args(argv)
    problem = out_folder_problem(Path(args.out), args.overwrite)
    if Path(args.ckpt_path).is_dir():
        parser.error(f"--ckpt_path {args.ckpt_path}: is a folder, not a file (give a .ckpt file that onlstm-tasks fit "
                     "wrote)")
    if not Path(args.ckpt_path).is_file():
        parser.error(f"--ckpt_path {args.ckpt_path}: no such file")
    if problem:
        parser.error(f"--out {args.out}: {problem}")
    export(args.ckpt_path, args.out, args.push_to_hub, args.private or None, args.license)
    print(f"wrote {args.out}" + (f" and pushed it to {args.push_to_hub}" if args.push_to_hub else ""))
