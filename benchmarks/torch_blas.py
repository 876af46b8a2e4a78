"""The BLAS under PyTorch, checked before every PyTorch run in benchmarks/.

Debian's python3-torch is built against the generic libblas.so.3, and a fresh Debian machine has
only the reference (Netlib) implementation behind it: about 5 GFLOP/s on one core, which made
PyTorch's VGG-11 5x slower than a PyTorch user's. Comparisons must run PyTorch on a real BLAS:
libopenblas0-pthread, whose installation switches the libblas.so.3 alternative by itself.

  require(threads, install_missing=True)  installs libopenblas0-pthread when missing
                 (scripts/setup.sh; the process starts again if torch was loaded already), checks it,
                 sets torch's and OpenBLAS's threads, and returns what it found; exits with an error
                 naming the fix on the reference BLAS
  python3 torch_blas.py [--threads N] [--no-install]   the same, printing one line (scripts)

The check reads both the libblas.so.3 alternative and the library torch really loaded (this
process's /proc/self/maps), and times a 1024x1024 fp32 matmul on one thread (best of 3, in CPU
time, so that a busy machine does not fail it): the reference BLAS runs it at ~5 GFLOP/s, OpenBLAS
at tens.

Two more handicaps it removes:
- OpenBLAS sizes its own thread pool from the cores, not from torch.set_num_threads (this torch
  does not know it links OpenBLAS): require() sets OpenBLAS's threads to the run's.
- Debian's OpenBLAS 0.3.21 picks its kernels from the CPU model; on a CPU it does not know (a VM's
  "Intel(R) Xeon(R) Processor" with AVX-512 and AMX) it falls back to Prescott's SSE3 kernels:
  21.6 GFLOP/s where SkylakeX's run 107 (measured 2026-11-26 on such a VM). When the core it
  chose lacks the AVX2 or AVX-512 the CPU's flags have, require() sets OPENBLAS_CORETYPE (read
  when the library loads) and restarts the process; `torch_blas.py --coretype` prints the value
  for scripts to export before they start PyTorch (empty when OpenBLAS's own choice is right). On
  Zen 4, which 0.3.21 runs with its AVX2 "Zen" kernels, that means Cooperlake's AVX-512 ones (not
  measured on Zen 4 here). A user's own OPENBLAS_CORETYPE is kept."""
import argparse
import ctypes
import os
import subprocess
import sys
import sysconfig
import time

PACKAGE = "libopenblas0-pthread"
ALTERNATIVE = f"/usr/lib/{sysconfig.get_config_var('MULTIARCH') or 'x86_64-linux-gnu'}/libblas.so.3"
SETUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "setup.sh")
MIN_GFLOPS = 15.0  # 3x the reference BLAS on one thread; OpenBLAS's generic kernels run ~21, its AVX2 ones ~30-60
FIX = f"install OpenBLAS: bash scripts/setup.sh {PACKAGE} (as root), then rerun"


def installed(package=PACKAGE):
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return status.returncode == 0 and "install ok installed" in status.stdout


def install():
    """Installs the package when missing. A torch loaded before the install still runs on the old
    library, so then the process starts again (same arguments) with the new one."""
    if installed():
        return
    print(f"torch_blas: {PACKAGE} is missing: installing it (scripts/setup.sh)", file=sys.stderr, flush=True)
    if subprocess.run(["bash", SETUP, PACKAGE]).returncode != 0 or not installed():
        sys.exit(f"torch_blas: installing {PACKAGE} failed: {FIX}")
    if "torch" in sys.modules:
        os.execv(sys.executable, [sys.executable] + sys.argv)


AVX512_CORES = {"SkylakeX", "Cooperlake", "SapphireRapids"}
AVX2_CORES = AVX512_CORES | {"Haswell", "Zen"}


def best_coretype():
    """The OpenBLAS core this CPU's flags allow (Cooperlake with AVX-512 BF16, SkylakeX with
    AVX-512, Haswell with AVX2 and FMA), or None."""
    with open("/proc/cpuinfo") as cpuinfo:
        flags = set(next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), []))
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    return "Haswell" if {"avx2", "fma"} <= flags else None


def wanted_coretype(loaded_core):
    """The OPENBLAS_CORETYPE to restart with when OpenBLAS chose a core below the CPU's, else None."""
    best = best_coretype()
    if best is None or loaded_core is None or os.environ.get("OPENBLAS_CORETYPE"):
        return None
    below = loaded_core not in (AVX512_CORES if best in AVX512_CORES else AVX2_CORES)
    return best if below else None


def loaded_blas():
    """The libblas this process has mapped (torch's), or None."""
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "/libblas.so" in line})
    return paths[0] if paths else None


def describe(path):
    """(name, reference?) of a BLAS library file."""
    if path is None:
        return "unknown (no libblas.so.3 mapped)", False
    if os.path.basename(os.path.dirname(path)) == "blas":  # Debian's libblas3: .../blas/libblas.so.3
        return "reference BLAS (Netlib, Debian libblas3)", True
    lib = ctypes.CDLL(path)
    if hasattr(lib, "openblas_get_config"):
        lib.openblas_get_config.restype = ctypes.c_char_p
        config = lib.openblas_get_config().decode().strip()  # "OpenBLAS 0.3.21 ... <core> MAX_THREADS=64"
        return config if config.startswith("OpenBLAS") else "OpenBLAS " + config, False
    return os.path.basename(os.path.dirname(path)), False


def linked_blas(torch):
    """The BLAS and oneDNN a wheel's torch links into itself (no libblas.so.3 mapped), as its build
    configuration names them."""
    lines = [line.strip(" -") for line in torch.__config__.show().splitlines()]
    found = [line for line in lines if "Math Kernel Library" in line or "MKL-DNN" in line or "OpenBLAS" in line]
    return "; ".join(found) or "unknown (no libblas.so.3 mapped)"


def openblas_core(path):
    """The kernel set OpenBLAS chose (openblas_get_corename), or None for other libraries."""
    lib = ctypes.CDLL(path) if path else None
    if lib is None or not hasattr(lib, "openblas_get_corename"):
        return None
    lib.openblas_get_corename.restype = ctypes.c_char_p
    return lib.openblas_get_corename().decode()


def blas_threads(path, n=None):
    """Sets (n given) and reads OpenBLAS's own thread count; None for other libraries."""
    lib = ctypes.CDLL(path) if path else None
    if lib is None or not hasattr(lib, "openblas_get_num_threads"):
        return None
    if n is not None:
        lib.openblas_set_num_threads(ctypes.c_int(n))
    return lib.openblas_get_num_threads()


def matmul_gflops(torch, size=1024, reps=3):
    """On one thread, in this process's CPU time (best of reps): what the library computes, not
    what the other processes on a shared machine leave it."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)  # warm-up: first-touch pages, thread start
    best = min(_cpu_seconds(lambda: torch.mm(a, b)) for _ in range(reps))
    return 2 * size**3 / best / 1e9


def _cpu_seconds(f):
    start = time.process_time()
    f()
    return time.process_time() - start


def require(threads=1, install_missing=True):
    """Installs (install_missing) and checks the BLAS, sets `threads` for torch and OpenBLAS;
    returns the record every results table keeps. Exits naming the fix on the reference BLAS.
    Only a torch on the system's libblas.so.3 (Debian's) gets OpenBLAS installed; a wheel's torch
    brings its own BLAS, and its machine may have no package archive."""
    import torch

    torch.set_num_threads(1)
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # make sure the BLAS is loaded and mapped
    path = loaded_blas()
    if install_missing and path:
        install()  # starts this process again when it installs
    name, reference = describe(path) if path else (linked_blas(torch), False)
    core = openblas_core(path)
    coretype = wanted_coretype(core)
    if coretype:  # read at load time only: start again with it
        print(f"torch_blas: OpenBLAS chose its {core} kernels on a CPU with {coretype}'s: restarting with "
              f"OPENBLAS_CORETYPE={coretype}", file=sys.stderr, flush=True)
        os.environ["OPENBLAS_CORETYPE"] = coretype
        os.execv(sys.executable, [sys.executable] + sys.argv)
    blas_threads(path, 1)
    gflops = matmul_gflops(torch)
    torch.set_num_threads(threads)
    record = {"torch": torch.__version__, "blas": name, "blas_library": path,
              "libblas_alternative": os.path.realpath(ALTERNATIVE), "blas_core": core,
              "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"), "matmul_gflops_1thread": round(gflops, 1),
              "threads": threads, "blas_threads": blas_threads(path, threads)}
    if reference:
        sys.exit(f"torch_blas: PyTorch {torch.__version__} runs on the {name} ({path}, alternative "
                 f"{ALTERNATIVE} -> {record['libblas_alternative']}): a 1024x1024 fp32 matmul runs at {gflops:.1f} "
                 f"GFLOP/s on one thread, a handicap no PyTorch user has. {FIX}" +
                 ("; if it is installed, put the alternative back on auto: update-alternatives --auto "
                  f"libblas.so.3-{sysconfig.get_config_var('MULTIARCH')}" if installed() else ""))
    if gflops < MIN_GFLOPS:
        sys.exit(f"torch_blas: PyTorch {torch.__version__} on {name} ({path}) runs a 1024x1024 fp32 matmul at only "
                 f"{gflops:.1f} GFLOP/s on one thread (the reference BLAS runs ~5, OpenBLAS tens; at least "
                 f"{MIN_GFLOPS:.0f} needed): a BLAS slower than OpenBLAS. {FIX}")
    return record


def summary(record):
    """One line for logs and tables."""
    where = record["blas_library"] or "linked into torch"
    return (f"PyTorch {record['torch']}, {record['blas']} ({where}): 1024x1024 fp32 matmul "
            f"{record['matmul_gflops_1thread']} GFLOP/s on 1 thread; runs with {record['threads']} thread(s)"
            + (f", OpenBLAS {record['blas_threads']}" if record["blas_threads"] is not None else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="compute threads of the runs that follow (default 1)")
    ap.add_argument("--no-install", action="store_true", help=f"only check; do not install {PACKAGE}")
    ap.add_argument("--coretype", action="store_true",
                    help="only print the OPENBLAS_CORETYPE to export for this CPU (empty: OpenBLAS's own choice)")
    a = ap.parse_args()
    if a.coretype:  # the library behind the alternative, loaded here without torch
        path = os.path.realpath(ALTERNATIVE)
        core = openblas_core(path) if os.path.exists(path) else None
        print(os.environ.get("OPENBLAS_CORETYPE") or wanted_coretype(core) or "")
        return
    print("torch_blas:", summary(require(a.threads, not a.no_install)))


if __name__ == "__main__":
    main()
