#!/usr/bin/env python3
"""Assembles the FlashInfer carry folder: the Python files FlashInfer needs to import and
to run the peer script's calls, the ahead-of-time modules built by
build_flashinfer_modules.py, and apache-tvm-ffi (its loader), in one directory that goes on
PYTHONPATH on a machine without network.

FlashInfer is a peer measured beside gem, never part of it. Run this with the Python of the
virtual environment that holds flashinfer-python and apache-tvm-ffi (the versions the
modules were built with).

What is kept of flashinfer: every file that `import flashinfer` (and its decode, prefill
and JIT modules) imports or opens, recorded in a child process, every .py file beside an
imported one, and every .py file of the package's top level and of flashinfer/jit. What is
left out: the CUDA/C++ sources and headers under flashinfer/data (only a compiler needs
them; the few templates and sources that FlashInfer reads while it describes the modules
are recorded and kept), and the kernels of other features (MoE, experimental, ...) that
nothing on the decode path imports. The modules go to
flashinfer/data/aot/<module>/<module>.so, where FlashInfer looks before it compiles.

usage: build_carry.py SITE --aot DIR      (also writes env.sh and .gitignore beside SITE)
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

RECORD = r"""
import json, os, sys
opened = set()
def hook(event, args):
    if event == "open" and args and isinstance(args[0], str):
        opened.add(os.path.realpath(args[0]))
sys.addaudithook(hook)
import flashinfer, flashinfer.decode, flashinfer.prefill, flashinfer.page
import flashinfer.jit.core, flashinfer.jit.env, flashinfer.jit.attention.modules
import flashinfer.utils, flashinfer.api_logging
sys.path.insert(0, sys.argv[1])
import build_flashinfer_modules
build_flashinfer_modules.module_specs()  # reads templates and sources under data/csrc
root = os.path.realpath(os.path.dirname(flashinfer.__file__))
files = set()
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f and os.path.realpath(f).startswith(root + os.sep):
        files.add(os.path.realpath(f))
files |= {f for f in opened if f.startswith(root + os.sep) and os.path.isfile(f)}
print(json.dumps({"root": root, "version": flashinfer.__version__, "files": sorted(files)}))
"""

# sourced before the peer script: FlashInfer and tvm_ffi from the folder, no JIT compiling,
# FlashInfer's scratch files under /tmp
ENV_SH = """# FlashInfer carry folder: FlashInfer is a peer measured beside gem, never part of it.
# Usage: . .peers/env.sh   (then scripts/peers/decode_peers.py finds FlashInfer)
_peers_dir=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export PYTHONPATH="$_peers_dir/@SITE@${PYTHONPATH:+:$PYTHONPATH}"
export FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/gem-peers-flashinfer
export TVM_FFI_CACHE_DIR=/tmp/gem-peers-tvm-ffi
unset _peers_dir
"""

# tvm_ffi: headers and sources serve compilers only
TVM_FFI_SKIP = {"include", "3rdparty", "src"}


def die(msg):
    sys.exit(f"build_carry: {msg}")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_bytes(path):
    total = 0
    for d, _, fs in os.walk(path):
        total += sum(os.path.getsize(os.path.join(d, f)) for f in fs)
    return total


def copy_file(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(src, dst)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", help="the directory to create (replaced if it exists)")
    ap.add_argument("--aot", required=True, help="OUT of build_flashinfer_modules.py")
    ap.add_argument("--limit-mib", type=float, default=45.0, help="fail above this size")
    args = ap.parse_args()

    if not os.path.isdir(args.aot) or not os.listdir(args.aot):
        die(f"--aot {args.aot}: no modules there (run build_flashinfer_modules.py first)")
    env = dict(os.environ, FLASHINFER_CUDA_ARCH_LIST=os.environ.get(
        "FLASHINFER_CUDA_ARCH_LIST", "9.0a"))
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        env["FLASHINFER_WORKSPACE_BASE"] = tmp
        r = subprocess.run([sys.executable, "-c", RECORD, here], capture_output=True, text=True,
                           env=env)
    if r.returncode != 0:
        die("importing flashinfer failed:\n" + r.stderr[-3000:])
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    root = rec["root"]
    site_packages = os.path.dirname(root)

    recorded = set(rec["files"])
    keep = set(recorded)
    # the siblings of what was imported: a lazy import of a neighbouring module still works
    imported_dirs = {os.path.dirname(f) for f in keep if f.endswith(".py")}
    for d in imported_dirs:
        keep |= {os.path.join(d, f) for f in os.listdir(d) if f.endswith(".py")}
    for d, _, fs in os.walk(root):
        rel = os.path.relpath(d, root)
        top = rel == "."
        in_jit = rel == "jit" or rel.startswith("jit" + os.sep)
        if "__pycache__" in rel.split(os.sep):
            continue
        for f in fs:
            if (top or in_jit) and f.endswith(".py"):
                keep.add(os.path.join(d, f))
            if top and f == "py.typed":
                keep.add(os.path.join(d, f))
    # every package on the way to a kept file keeps its __init__.py
    for f in list(keep):
        d = os.path.dirname(f)
        while d.startswith(root):
            init = os.path.join(d, "__init__.py")
            if os.path.exists(init):
                keep.add(init)
            d = os.path.dirname(d)
    data = os.path.join(root, "data") + os.sep
    keep = {f for f in keep if "__pycache__" not in f.split(os.sep)
            and (f in recorded or not f.startswith(data))}

    if os.path.exists(args.site):
        shutil.rmtree(args.site)
    os.makedirs(args.site)
    dst_root = os.path.join(args.site, "flashinfer")
    for f in sorted(keep):
        copy_file(f, os.path.join(dst_root, os.path.relpath(f, root)))

    modules = []
    for name in sorted(os.listdir(args.aot)):
        so = os.path.join(args.aot, name, name + ".so")
        if not os.path.isfile(so):
            die(f"--aot {args.aot}: {name}/{name}.so missing")
        dst = os.path.join(dst_root, "data", "aot", name, name + ".so")
        copy_file(so, dst)
        modules.append({"name": name, "bytes": os.path.getsize(so), "sha256": sha256(so)})

    import tvm_ffi  # noqa: PLC0415 - the loader the modules were built against

    tvm_root = os.path.dirname(os.path.realpath(tvm_ffi.__file__))
    for d, dirs, fs in os.walk(tvm_root):
        rel = os.path.relpath(d, tvm_root)
        if rel == ".":
            dirs[:] = [x for x in dirs if x not in TVM_FFI_SKIP and x != "__pycache__"]
        else:
            dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in fs:
            if f.endswith((".pyc", ".pyx", ".pxi", ".pxd", ".cc", ".h")):
                continue
            copy_file(os.path.join(d, f), os.path.join(args.site, "tvm_ffi", rel, f))

    dists = []
    for entry in sorted(os.listdir(site_packages)):
        if entry.endswith(".dist-info") and entry.split("-")[0] in (
                "flashinfer_python", "apache_tvm_ffi"):
            dists.append(entry)
            for d, _, fs in os.walk(os.path.join(site_packages, entry)):
                for f in fs:
                    if f == "RECORD":  # lists files this folder leaves out
                        continue
                    src = os.path.join(d, f)
                    copy_file(src, os.path.join(args.site, os.path.relpath(src, site_packages)))

    manifest = {
        "what": "FlashInfer, a peer measured beside gem (never part of it), trimmed to the "
                "peer script's calls, with its modules built ahead of time for sm_90a",
        "flashinfer": rec["version"],
        "apache_tvm_ffi": getattr(tvm_ffi, "__version__", "?"),
        "dists": dists,
        "python_files": len(keep),
        "modules": modules,
        "rebuild": "scripts/peers/build-carry.sh (see scripts/peers/README.md)",
    }
    with open(os.path.join(args.site, "PEERS-CARRY.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    carry_dir = os.path.dirname(os.path.abspath(args.site))
    with open(os.path.join(carry_dir, "env.sh"), "w") as f:
        f.write(ENV_SH.replace("@SITE@", os.path.basename(os.path.abspath(args.site))))
    # the folder ignores itself, so that nothing of FlashInfer is ever added to the repository
    with open(os.path.join(carry_dir, ".gitignore"), "w") as f:
        f.write("# FlashInfer carry folder (scripts/peers/build_carry.py): never committed\n*\n")
    size = tree_bytes(args.site)
    print(f"build_carry: {args.site}: {size / 2**20:.1f} MiB, {len(keep)} flashinfer files, "
          f"{len(modules)} modules")
    if size > args.limit_mib * 2**20:
        die(f"{args.site} is {size / 2**20:.1f} MiB, over --limit-mib {args.limit_mib:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
