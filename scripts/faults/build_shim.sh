#!/usr/bin/env bash
# Builds the CUDA fault stand-in (make_cuda_shim.py) into DIR/libcuda.so, for every driver
# function the product's cudarc can call. scripts/gpu.sh --collect carries it to the GPU machine
# (part `faults`); scripts/test.sh builds it to check that the tooling still works.
#
#   bash scripts/faults/build_shim.sh DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: build_shim.sh DIR}
mkdir -p "$out"
cudarc=$(cargo metadata --format-version 1 2>/dev/null | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="cudarc").rsplit("/",1)[0])')
grep -oh 'load::<_F>("cu[A-Za-z0-9_]*")' "$cudarc"/src/driver/sys/mod.rs | sed 's/.*("\(.*\)")/\1/' | sort -u > "$out/symbols.txt"
[ -s "$out/symbols.txt" ] || { echo "build_shim: no driver functions found in $cudarc" >&2; exit 1; }
python3 scripts/faults/make_cuda_shim.py "$out/symbols.txt" > "$out/shim.c"
cc -shared -fPIC -O2 -Wall -Werror -o "$out/libcuda.so" "$out/shim.c" -ldl
echo "build_shim: $out/libcuda.so ($(wc -l < "$out/symbols.txt") driver functions)"
