#!/usr/bin/env bash
# Ray for scripts/cluster's `--executor ray` (docs/cluster.md), into .cache/cluster-py with pip's
# --target: nothing system-wide, no virtual environment needed. scripts/cluster finds it there.
# Idempotent. The local executor (`--executor local`, the default) needs none of it.
set -euo pipefail
cd "$(dirname "$0")/.."
RAY_VERSION=2.52.1
SITE=.cache/cluster-py
if PYTHONPATH=$SITE python3 -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  exit 0
fi
echo "install-cluster: pip install ray==$RAY_VERSION into $SITE" >&2
python3 -m pip install --quiet --disable-pip-version-check --upgrade --target "$SITE" "ray==$RAY_VERSION"
