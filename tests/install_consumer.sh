#!/bin/sh
# Installs the build tree into a temporary prefix, then builds and runs the
# conv_layer example against it twice: with pkg-config (static and shared)
# and with CMake's find_package; then, where /usr/bin/python3 has NumPy, runs
# the installed Python package, which finds the installed library by itself.
# Usage: install_consumer.sh BUILD_DIR SOURCE_DIR [PYTHON_DIR]
set -eu
build=$1
src=$2
pydir=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -n 1)
export PKG_CONFIG_PATH="$libdir"
cc -std=c11 "$src/examples/conv_layer.c" $(pkg-config --cflags nconv) $(pkg-config --libs --static nconv) \
   -Wl,-rpath,"$(dirname "$libdir")" -o "$tmp/conv_layer_pc"
"$tmp/conv_layer_pc"
cmake -S "$src/tests/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
      -DEXAMPLE_SOURCE="$src/examples/conv_layer.c" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/conv_layer"
echo "install consumer: pkg-config and find_package builds ran"
if [ -n "$pydir" ] && /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  (cd "$tmp" && env -u NCONV_LIBRARY PYTHONPATH="$tmp/prefix/$pydir" /usr/bin/python3 -c "
import numpy as np, nconv
assert nconv.lib._name.startswith('$tmp/prefix/'), nconv.lib._name
y = nconv.conv2d(np.ones((1, 2, 4, 4), np.float32), np.ones((3, 2, 3, 3), np.float32), padding=1)
assert y.shape == (1, 3, 4, 4) and y[0, 0, 1, 1] == 18, y
print('install consumer: the installed Python package ran on', nconv.lib._name)")
fi
