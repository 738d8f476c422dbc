# Shared by the analyze-*.sh wrappers: finds the gem binary (the GEM
# environment variable, else build/gem under the repository) or says why not.
gem_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GEM="${GEM:-$gem_root/build/gem}"
if [ ! -x "$GEM" ]; then
  echo "$(basename "$0"): the gem binary is missing at '$GEM'; build it" \
       "(cmake -S $gem_root -B $gem_root/build && cmake --build $gem_root/build)" \
       "or set GEM=/path/to/gem" >&2
  exit 2
fi
