#!/usr/bin/env bash
# The GPU check, for a short GPU loan (at most 8 minutes on one H100/H200). Prepare here:
#   bash scripts/fetch_gpu_wheels.sh        # the wheels the GPU image lacks into .whl/, a copy of the data kit's
#                                           # OntoNotes sample and 40,000 unlabelled sentences into .kit/ (both
#                                           # ignored by git, never committed)
# then run on the device, from the repository root, carrying [".whl", ".kit"]:
#   bash scripts/gpu_check.sh               # prints everything, ends in one summary table; logs to $OUT when set
# Steps (each capped by a timeout; budget in seconds): the Triton kernels compiled ahead, 12 processes at once, into
# Triton's disk cache (scripts/warm_triton_kernels.py) 240; the CUDA tests, required to pass (ONLSTM_REQUIRE_CUDA=1:
# a skip fails) 180; the encoder table against cuDNN nn.LSTM at NER and language-model shapes, once with TF32 and
# once in full float32 on both sides (the ON-LSTM column is the default on a GPU, the triton back end; the loop
# column the per-step PyTorch loop) 2 x 150, then the host time of one layer call, the registered operator against
# the eager path (scripts/benchmark_layer_call.py) 60, and the CRF's Triton kernels against its scan
# (scripts/benchmark_crf.py) 60; end-to-end training on the OntoNotes kit, tokens/s of every
# epoch, the first included, ON-LSTM-CRF against LSTM-CRF (shipped configs) and the GPU config at max_tokens 4,096,
# 8,192 and 16,384 150; the anatomy of a real fit's step, host time per phase against the device's kernels
# (scripts/step_anatomy.py), shipped and GPU configs, 2 x 60; host syncs of a real fit under set_sync_debug_mode (scripts/fit_sync_check.py), shipped and GPU
# configs, 2 x 60; the quickstart in float32 and bf16 autocast, wall time and test F1, 2 x 45; the shipped
# bidirectional LM config for 300 steps 60.
# GPU_CHECK_ONLY="tests quickstart" (any of: warm tests encoders training anatomy fitsync quickstart lm) runs only those
# steps, for a short rerun after a fix.
set -uo pipefail
cd "$(dirname "$0")/.."
ONLY=" ${GPU_CHECK_ONLY:-warm tests encoders training anatomy fitsync quickstart lm} "
want() { [[ "$ONLY" == *" $1 "* ]]; }
tests=0
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
LOG=${OUT:-/tmp}/gpu_check.log
SUMMARY=$(mktemp)
exec > >(tee "$LOG") 2>&1
start=$SECONDS
step() { echo; echo "=== $* ($((SECONDS - start)) s)"; }
row() { printf '| %s | %s |\n' "$1" "$2" >> "$SUMMARY"; }
NER_CONFIGS="configs/ner/ontonotes_onlstm_crf.yaml configs/ner/ontonotes_onlstm_crf_gpu.yaml"
KIT="--data.init_args.path .kit/conll2012_ontonotesv5 --data.init_args.revision null"  # the kit's OntoNotes copy

step "machine"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
row "GPU" "${gpu:-unknown}"

step "wheels the image lacks"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "no wheels in .whl: run scripts/fetch_gpu_wheels.sh here first and carry .whl"; exit 1; }
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"

if want warm; then
step "the Triton kernels compiled ahead, 12 at a time, into Triton's disk cache (scripts/warm_triton_kernels.py)"
timeout 240 python3 scripts/warm_triton_kernels.py --jobs 12 | tee /tmp/warm.log
row "kernels warmed" "$(tail -1 /tmp/warm.log)"
fi

if want tests; then
step "CUDA tests"
ONLSTM_REQUIRE_CUDA=1 timeout 180 python3 -m pytest -q -rs -p no:cacheprovider -m cuda tests/encoders/test_onlstm_backends.py \
  tests/encoders/test_onlstm_triton.py tests/modules/test_crf_scan.py tests/modules/test_crf_triton.py \
  | tee /tmp/cuda_tests.log
tests=${PIPESTATUS[0]}
row "CUDA tests" "$(tail -1 /tmp/cuda_tests.log) (exit $tests)"
fi

if want encoders; then
for precision in tf32 ieee; do
step "encoders ($precision on both sides): ON-LSTM (triton) and its per-step loop vs cuDNN nn.LSTM (B 32, T 40, D 128, H 256, chunk 8; LM stack)"
timeout 150 python3 scripts/benchmark_encoders.py --device cuda --quick --markdown --lm --no-compile \
  --precision $precision | tee /tmp/encoders_$precision.log
row "bi x 2, full, fwd+bwd, $precision: ON-LSTM / cuDNN (loop / cuDNN)" \
  "$(awk '$1=="bi" && $2==2 && $3=="full" && $4=="forward+backward" {print $7, "(" $9 ")"}' /tmp/encoders_$precision.log | head -1)"
row "bi x 2, full, inference, $precision: ON-LSTM / cuDNN (loop / cuDNN)" \
  "$(awk '$1=="bi" && $2==2 && $3=="full" && $4=="inference" {print $7, "(" $9 ")"}' /tmp/encoders_$precision.log | head -1)"
row "LM stack fwd+bwd, $precision" "$(grep -m1 '^forward+backward' /tmp/encoders_$precision.log | cut -c18-)"
row "LM stack inference, $precision" "$(grep -m1 '^inference' /tmp/encoders_$precision.log | cut -c18-)"
done
step "host time of one layer call: the registered operator vs the eager path (scripts/benchmark_layer_call.py)"
timeout 60 python3 scripts/benchmark_layer_call.py --device cuda --repeats 200 | tee /tmp/layer_call.log
for size in tiny shipped; do
  row "layer call fwd+bwd, $size, wall: operator / eager" \
    "$(awk -v s="$size" '$1==s && $2=="wall" {print $4, "/", $7, "us (" $NF ")"}' /tmp/layer_call.log)"
done
step "the CRF's likelihood + gradient: its Triton kernels against the log-semiring scan (B 32, T 10..40, 37 tags)"
timeout 60 python3 scripts/benchmark_crf.py --device cuda --repeats 50 --min-length 10 | tee /tmp/crf.log
row "CRF likelihood + gradient, wall, median: triton / scan" \
  "$(grep -A1 'path against the log-semiring scan' /tmp/crf.log | awk '$1=="wall:" {print $7, "/", $15, "ms"}')"
fi

if want training; then
step "end-to-end training on the OntoNotes kit: tokens/s per epoch (the first included); the GPU config at max_tokens 4,096 / 8,192 / 16,384"
gpu=configs/ner/ontonotes_onlstm_crf_gpu.yaml
timeout 150 python3 scripts/benchmark_training.py --data .kit/conll2012_ontonotesv5 --epochs 3 --configs \
  ON-LSTM-CRF=configs/ner/ontonotes_onlstm_crf.yaml LSTM-CRF=configs/ner/ontonotes_lstm_crf.yaml \
  GPU-4096=$gpu GPU-8192=$gpu@data.init_args.max_tokens=8192 GPU-16384=$gpu@data.init_args.max_tokens=16384 \
  | tee /tmp/training.log
row "loader alone (0 workers, 1 thread)" "$(grep -m1 'loader alone' /tmp/training.log | grep -Eo '[0-9,]+ tokens/s')"
for name in ON-LSTM-CRF LSTM-CRF GPU-4096 GPU-8192 GPU-16384; do
  row "$name tokens/s (ms per step), epochs 1 / 2 / 3" \
    "$(awk -v n="$name" '$1==n && $2 ~ /^[0-9]+$/ {printf "%s (%s) ", $4, $5}' /tmp/training.log)"
  row "$name first epoch against later ones" "$(awk -v n="$name" '$1==n && $2=="first" {sub(/^[^ ]+ +/, ""); print}' \
    /tmp/training.log)"
done
fi

if want anatomy; then
step "anatomy of a training step: host time per phase against the device's kernels (scripts/step_anatomy.py, 40 steps)"
for config in $NER_CONFIGS; do
  timeout 60 python3 scripts/step_anatomy.py --config $config --steps 40 -- $KIT 2>&1 | tail -1 | tee -a /tmp/anatomy.log
done
row "step anatomy, shipped / GPU config (ms per step)" "$(sed 's/^step_anatomy [^:]*: //' /tmp/anatomy.log | paste -sd '|' | sed 's/|/ \/ /')"
fi

if want fitsync; then
step "host syncs of a real fit (set_sync_debug_mode warn after 5 warm-up steps, 40 steps, logging every 10)"
for config in $NER_CONFIGS; do
  timeout 60 python3 scripts/fit_sync_check.py --config $config --steps 40 -- $KIT 2>&1 | grep -v Warning | tail -3 \
    | tee -a /tmp/fitsync.log
done
row "fit syncs (logging steps / other steps)" "$(grep -Eo 'logging steps [0-9]+, at the other steps [0-9]+' /tmp/fitsync.log | tr '\n' ';')"
fi

if want quickstart; then
step "quickstart on the GPU: float32, then bf16 autocast"
for precision in 32-true bf16-mixed; do
  t0=$SECONDS
  timeout 45 python3 -m onlstm_tasks.cli fit --config configs/quickstart.yaml --trainer.accelerator gpu \
    --trainer.precision "$precision" --trainer.default_root_dir "runs/gpu_$precision" \
    --trainer.logger.init_args.save_dir "runs/gpu_$precision" > "/tmp/quickstart_$precision.log" 2>&1
  status=$?
  f1=$(grep -Eo "test_f1 +│ +[0-9.]+" "/tmp/quickstart_$precision.log" | grep -Eo "[0-9.]+$" | tail -1)
  grep -E "test_f1|Error|error" "/tmp/quickstart_$precision.log" | head -5
  row "quickstart $precision: wall s, test F1" "$((SECONDS - t0)) s, ${f1:-none} (exit $status)"
done
fi

if want lm; then
step "bidirectional LM config: 300 steps (start-up included)"
t0=$SECONDS
timeout 60 python3 -m onlstm_tasks.cli fit --config configs/lm/unlabelled_en_onlstm_bi.yaml --trainer.max_steps 300 \
  --data.init_args.data_files '{"train": ".kit/unlabelled_en/train.txt", "validation":
    ".kit/unlabelled_en/validation.txt", "test": ".kit/unlabelled_en/test.txt"}' --trainer.callbacks "[]" \
  --trainer.limit_val_batches 0 --trainer.enable_checkpointing false --test_after_fit false \
  --trainer.default_root_dir runs/gpu_lm --trainer.logger.init_args.save_dir runs/gpu_lm > /tmp/lm.log 2>&1
status=$?
tail -3 /tmp/lm.log
row "LM bi config, 300 steps: wall s" "$((SECONDS - t0)) s (exit $status)"
fi

step "summary ($((SECONDS - start)) s)"
echo "| what | figure |"
echo "|---|---|"
cat "$SUMMARY"
exit $tests
