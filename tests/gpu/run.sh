#!/usr/bin/env bash
# The CUDA backend on a machine with an NVIDIA GPU, in under five minutes:
# builds the project (build-gpu/), runs the CUDA tests (graphs, then the CUDA path
# against the CPU path and against PyTorch's CUDA convolution on a few hundred
# small problems each), then times the public suite with `nconv bench --device cuda`
# next to PyTorch's CUDA times. Everything it prints goes to RESULTS/log.txt; the
# tables to RESULTS/bench.csv and RESULTS/bench_torch.csv.
#
#     tests/gpu/run.sh [RESULTS]          (default gpu-results/)
#
# The suite is $NCONV_GPU_SUITE, else ../shared/suites/public.txt, else the embedded
# default suite. Exit status: 0 when every check passed, else 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-gpu-results}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1
start=$(date +%s)
stage() { echo "== $1 ($(($(date +%s) - start)) s)"; }
status=0
python=/usr/bin/python3
[ -x "$python" ] && "$python" -c "import torch" 2>/dev/null || python=python3

# cuDNN and the CUDA runtime where PyTorch's wheels put them (nvidia-cudnn-cu13,
# nvidia-cuda-runtime), else the toolkit's: the same cuDNN as PyTorch's, headers and library.
wheel_dir() { "$python" -c "import importlib; m = importlib.import_module('$1'); print(list(m.__path__)[0])" 2>/dev/null; }
cmake_args=()
cudnn_dir=$(wheel_dir nvidia.cudnn || true)
if [ -n "$cudnn_dir" ] && [ -f "$cudnn_dir/include/cudnn_graph.h" ]; then
    cmake_args+=("-DNCONV_CUDNN_INCLUDE_DIR=$cudnn_dir/include")
    export NCONV_CUDNN_LIBRARY="$cudnn_dir/lib/libcudnn.so.9" LD_LIBRARY_PATH="$cudnn_dir/lib:${LD_LIBRARY_PATH:-}"
fi
cudart_dir=$(wheel_dir nvidia.cuda_runtime || true)
if [ ! -e /usr/local/cuda/lib64/libcudart.so.13 ] && [ -n "$cudart_dir" ]; then
    export LD_LIBRARY_PATH="$cudart_dir/lib:${LD_LIBRARY_PATH:-}"
fi

stage "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" || true
echo "cuDNN for nconv: ${NCONV_CUDNN_LIBRARY:-libcudnn.so.9, found by the dynamic loader}"

stage "build"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DNCONV_CUDNN=ON "${cmake_args[@]}" >"$out/cmake.txt" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" --target nconv nconv_cli test_cudnn gpu_check >>"$out/cmake.txt" 2>&1 ||
    { tail -30 "$out/cmake.txt"; echo "BUILD FAILED"; exit 1; }

stage "test_cudnn (graphs)"
build-gpu/tests/test_cudnn | tail -4 || status=1

stage "gpu_check (CUDA path against the CPU path)"
timeout 120 build-gpu/tests/gpu_check "${NCONV_GPU_PROBLEMS:-300}" | grep -E "FAIL|passed|largest|SKIP" | head -60
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || { echo "gpu_check: exit $rc"; status=1; }

stage "torch_check (CUDA path against PyTorch's CUDA convolution)"
PYTHONPATH=python NCONV_LIBRARY=build-gpu/libnconv.so timeout 120 "$python" tests/gpu/torch_check.py \
    "${NCONV_GPU_PROBLEMS:-300}" | grep -E "FAIL|passed|SKIP" | head -60
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || { echo "torch_check: exit $rc"; status=1; }

stage "bench (nconv bench --device cuda, then PyTorch)"
suite=${NCONV_GPU_SUITE:-../shared/suites/public.txt}
if [ -f "$suite" ]; then set -- --batch "$suite"; else echo "no $suite: the embedded suite"; set --; fi
timeout 90 build-gpu/nconv bench --device cuda --csv "$@" >"$out/bench.csv" || status=1
timeout 90 "$python" bench/torch_bench.py "$out/bench.csv" --device cuda >"$out/bench_torch.csv" || status=1
"$python" - "$out/bench_torch.csv" <<'PY' || status=1
import csv, math, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["torch_ms"]]
print("%-28s %-5s %-6s %9s %9s %7s" % ("name", "dir", "layout", "nconv_ms", "torch_ms", "ratio"))
for r in rows:
    print("%-28s %-5s %-6s %9s %9s %7s" % (r["name"], r["dir"], r["layout"], r["ms"], r["torch_ms"], r["ratio_torch"]))
ratios = [float(r["ratio_torch"]) for r in rows]
if ratios:
    print("rows %d, geomean torch/nconv %.3f, lowest %.3f (target: every row >= %.3f)" % (
        len(ratios), math.exp(sum(map(math.log, ratios)) / len(ratios)), min(ratios), 1 / 1.1))
PY

stage "done: $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
