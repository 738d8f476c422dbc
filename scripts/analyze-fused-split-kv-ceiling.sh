#!/usr/bin/env bash
# The design's ceiling screen: from baseline stage profiles at 64K and 128K,
# the share of whole-token time in the ten global-attention calls and the
# reduction within global attention needed to clear the 3% admission floor.
# Writes fused-split-kv-ceiling.json (or --out PATH). Not a promotion claim.
#   usage: analyze-fused-split-kv-ceiling.sh PROFILE_64K PROFILE_128K [--out PATH]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gem-analyze-common.sh"
exec "$GEM" analyze ceiling "$@"
