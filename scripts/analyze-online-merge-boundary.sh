#!/usr/bin/env bash
# The design's boundary analyzer: validates a gem-online-merge-check receipt,
# binds the design's positions, geometry, thresholds and seeds, and recomputes
# the raw-input digests from the seeds. Fails closed with one line.
#   usage: analyze-online-merge-boundary.sh RECEIPT [--out ANALYSIS]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gem-analyze-common.sh"
exec "$GEM" analyze merge-boundary "$@"
