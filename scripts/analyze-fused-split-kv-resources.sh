#!/usr/bin/env bash
# The design's compiled-resource analyzer: validates a `gem resources` receipt
# (geometry, scratch contract, compute capability, first pass and reducer
# resources, source and binary digests). Passing means only "compilable and
# launchable".
#   usage: analyze-fused-split-kv-resources.sh RECEIPT [--root DIR] [--out ANALYSIS]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gem-analyze-common.sh"
exec "$GEM" analyze resources "$@"
