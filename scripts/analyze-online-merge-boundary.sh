#!/usr/bin/env bash
# The design's boundary analyzer: validates a gem-online-merge-check receipt,
# binds the design's positions, geometry, thresholds and seeds, checks every
# figure's range and consistency, and reruns every case from its seed (input
# and output digests and figures reproduced exactly). Fails closed with one line.
#   usage: analyze-online-merge-boundary.sh RECEIPT [--threads N] [--out ANALYSIS]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gem-analyze-common.sh"
exec "$GEM" analyze merge-boundary "$@"
