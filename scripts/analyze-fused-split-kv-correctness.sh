#!/usr/bin/env bash
# The design's correctness analyzer: the CPU gate and the resource receipt
# (both re-analyzed, their analyses required to match), five operator
# differentials and three model differentials, every file bound by digest.
# Never reports promotion eligibility.
#   usage: analyze-fused-split-kv-correctness.sh --merge R --merge-analysis A \
#            --resources R --resources-analysis A --diff F (x5) --model F (x3) \
#            [--root DIR] [--threads N] [--out PATH]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gem-analyze-common.sh"
exec "$GEM" analyze correctness "$@"
