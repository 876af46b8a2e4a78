#!/usr/bin/env bash
# Packs programs built here for a GPU machine that has the NVIDIA driver and CUDA libraries but not
# this machine's Debian packages: the programs (in their build-tree layout, so run.sh's BUILD_DIR
# points at OUT/build), every shared library they need that such a machine may lack, and a
# relocatable copy of Open MPI (mpirun, its plugins and help files) for the two-rank runs.
# OUT/env.sh sets PATH, LD_LIBRARY_PATH and Open MPI's prefixes; source it there before run.sh.
#
#   bash benchmarks/gpu/bundle.sh --build build/gpu --out build/gpu-bundle tests/cuda/test_device_codecs ...
#
# Left to the GPU machine (too large to carry, or tied to its driver): libcuda, the CUDA runtime, cuBLAS, cuDNN and
# NCCL (env.sh finds them there: the CUDA toolkit's lib64 or the nvidia-* Python wheels), and the C
# and C++ runtimes (a newer distribution's are backward compatible).
set -euo pipefail
build='' out=''
programs=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -*) echo "usage: bundle.sh --build DIR --out DIR PROGRAM..." >&2; exit 2 ;;
    *) programs+=("$1"); shift ;;
  esac
done
[ -n "$build" ] && [ -n "$out" ] && [ ${#programs[@]} -gt 0 ] ||
  { echo "usage: bundle.sh --build DIR --out DIR PROGRAM... (paths relative to the build dir)" >&2; exit 2; }

rm -rf "$out"
mkdir -p "$out/build" "$out/lib"
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
pmix_dir=/usr/lib/x86_64-linux-gnu/pmix2

# What the GPU machine provides itself (see above), by soname prefix.
provided='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s|libstdc\+\+|libcuda\.|libnvidia|libcudart|libcublas|libcublasLt|libcudnn|libnccl)'

# The shared libraries `file` needs, by path, that the GPU machine does not provide.
needed_libs() {
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $provided ]] || echo "$path"
  done
}

# Open MPI's plugins, without those the Debian configuration turns off anyway (verbs, UCX, OFI,
# whose libraries are large and useless on one machine).
plugins=()
for p in "$ompi_lib"/*.so; do
  case $(basename "$p") in *ucx* | *ofi* | *openib* | *verbs* | *uct* | *psm* | *portals*) continue ;; esac
  plugins+=("$p")
done

objects=()
for p in "${programs[@]}"; do
  [ -x "$build/$p" ] || { echo "bundle.sh: $build/$p is missing: build it first" >&2; exit 1; }
  mkdir -p "$out/build/$(dirname "$p")"
  cp "$build/$p" "$out/build/$p"
  objects+=("$build/$p")
done
objects+=(/usr/bin/orterun "${plugins[@]}" "$pmix_dir"/lib/pmix/*.so)
for o in "${objects[@]}"; do needed_libs "$o"; done | sort -u | while read -r lib; do cp -L "$lib" "$out/lib/"; done

# Open MPI under a prefix of its own: OPAL_PREFIX moves every directory it derives from /usr.
prefix=$out/ompi
mkdir -p "$prefix/bin" "$prefix/lib/x86_64-linux-gnu/openmpi/lib/openmpi3" "$prefix/share" "$prefix/etc"
cp /usr/bin/orterun "$prefix/bin/mpirun"
cp /usr/bin/orted "$prefix/bin/orted"
cp "${plugins[@]}" "$prefix/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/"
cp -r /usr/share/openmpi "$prefix/share/openmpi"
cp /etc/openmpi/openmpi-mca-params.conf "$prefix/etc/"
mkdir -p "$out/pmix/lib" "$out/pmix/share"
cp -r "$pmix_dir/lib/pmix" "$out/pmix/lib/pmix"
cp -r "$pmix_dir/share/pmix" "$out/pmix/share/pmix"

cat >"$out/env.sh" <<'EOF'
# Source this on the GPU machine: the bundle's programs find their libraries and Open MPI.
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The machine's CUDA libraries: the toolkit's, then those of the nvidia-* Python wheels.
cuda_dirs=
for lib in libcudart.so.13 libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
  found=$( (ls /usr/local/cuda/lib64/$lib /usr/lib/x86_64-linux-gnu/$lib 2>/dev/null;
            find /opt /usr/local/lib /usr/lib/python3* -name "$lib" -path '*nvidia*' 2>/dev/null) | head -1)
  [ -n "$found" ] && cuda_dirs=$cuda_dirs:$(dirname "$found")
done
export LD_LIBRARY_PATH=$bundle/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$bundle/ompi/bin:$PATH
export OPAL_PREFIX=$bundle/ompi OPAL_SYSCONFDIR=$bundle/ompi/etc PMIX_INSTALL_PREFIX=$bundle/pmix
export PMIX_MCA_mca_base_component_path=$bundle/pmix/lib/pmix  # not a PMIx of the machine's own
export OPAL_PKGLIBDIR=$bundle/ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 OPAL_PKGDATADIR=$bundle/ompi/share/openmpi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
EOF
du -sh "$out" | awk '{print "bundle.sh: " $1 " in '"$out"'"}'
