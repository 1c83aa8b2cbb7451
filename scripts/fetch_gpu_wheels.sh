#!/usr/bin/env bash
# Downloads, here (where PyPI is reachable), the wheels the GPU machine lacks into .whl/ (ignored by git), for
# scripts/gpu_check.sh there: its image has PyTorch, Lightning, Triton, transformers, pyarrow, pandas and pytest, but
# not these. Python 3.12 x86-64 (the GPU image's). seqeval has no wheel on PyPI: it is built here (pure Python).
# It also copies the data the check trains on into .kit/ (ignored by git, never committed: ../shared does not travel
# to the GPU machine): the kit's OntoNotes sample and the first 40,000 sentences of its unlabelled English.
#   bash scripts/fetch_gpu_wheels.sh      # then run scripts/gpu_check.sh on the device with carry [".whl", ".kit"]
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >> .git/info/exclude
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .whl pytorch-crf==0.7.2 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 jsonargparse==4.53.0 \
  docstring_parser==0.18.0 typeshed_client==2.15.0 importlib_resources
python3 -m pip wheel -q --no-deps -w .whl seqeval==1.2.2
du -sh .whl
grep -qx "/.kit/" .git/info/exclude 2>/dev/null || echo "/.kit/" >> .git/info/exclude
kit=../shared/data
mkdir -p .kit/unlabelled_en
cp -r "$kit/conll2012_ontonotesv5" .kit/
head -n 40000 "$kit/unlabelled_en/train.txt" > .kit/unlabelled_en/train.txt
cp "$kit/unlabelled_en/validation.txt" "$kit/unlabelled_en/test.txt" .kit/unlabelled_en/
du -sh .kit
