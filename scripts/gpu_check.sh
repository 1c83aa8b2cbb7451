#!/usr/bin/env bash
# The GPU check of the ON-LSTM operator, for a short GPU loan (at most 8 minutes on one H100/H200). Prepare here:
#   bash scripts/fetch_gpu_wheels.sh        # the wheels the GPU image lacks, into .whl/ (ignored by git)
# then run on the device, from the repository root, with .whl carried:
#   bash scripts/gpu_check.sh               # prints everything; copies the logs to $OUT when set
# It installs the wheels the image lacks (no registry there), then runs: the CUDA tests (ONLSTM_REQUIRE_CUDA=1: a
# skip fails), the speed table against cuDNN nn.LSTM at NER and language-model shapes (the ON-LSTM column is the
# default on a GPU, the fused step: each step's element-wise work compiled by torch.compile into Triton kernels; the
# loop column is the per-step PyTorch loop; the torch.compile-of-the-encoder column is left out to stay inside the
# loan), and the quickstart trained on the GPU in float32 and in bf16 autocast (test F1 of both printed). The CPU
# extension is not built there (nothing here runs the CPU loop). The fused step compiles once (about half a minute);
# Inductor's on-disk cache serves the later processes. Budget: tests 3 min, speed 3, quickstarts 2.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
LOG=${OUT:-/tmp}/gpu_check.log
exec > >(tee "$LOG") 2>&1
start=$SECONDS
step() { echo; echo "=== $* ($((SECONDS - start)) s)"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

step "wheels the image lacks"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "no wheels in .whl: run scripts/fetch_gpu_wheels.sh here first and carry .whl"; exit 1; }
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"

step "CUDA tests"
ONLSTM_REQUIRE_CUDA=1 timeout 180 python3 -m pytest -q -rs -p no:cacheprovider -m cuda tests/test_onlstm_backends.py \
  tests/test_onlstm_fused.py
tests=$?

step "speed: ON-LSTM vs cuDNN nn.LSTM (NER shapes B 32, T 40, D 128, H 256, chunk 8; then the LM stack)"
timeout 180 python3 scripts/benchmark_encoders.py --device cuda --quick --markdown --lm --no-compile

step "quickstart on the GPU: float32, then bf16 autocast"
for precision in 32-true bf16-mixed; do
  timeout 60 python3 -m onlstm_tasks.cli fit --config configs/quickstart.yaml --trainer.accelerator gpu \
    --trainer.precision "$precision" --trainer.default_root_dir "runs/gpu_$precision" \
    --trainer.logger.init_args.save_dir "runs/gpu_$precision" 2>&1 | grep -E "test_f1|Error|error" | head -5
done

step "done (CUDA tests exit status $tests)"
exit $tests
