#!/bin/sh
# Installs the build tree into a temporary prefix, then builds and runs the
# conv_layer example against it twice: with pkg-config (static and shared)
# and with CMake's find_package.
# Usage: install_consumer.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
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
