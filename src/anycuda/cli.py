"""The `anycuda` command: `info`, `demo`, `shim-path`, `run`."""
from __future__ import annotations

import argparse
import sys


def cmd_info(args) -> int:
    import llvmlite
    import llvmlite.binding as llvm
    import numpy

    from . import __version__
    from .compiler.build.jit import target_description
    from .cudac import compiler_description
    from .runtime.device import device_count, properties
    print(f"anycuda {__version__}")
    count = device_count()
    for device in range(count):
        p = properties(device)
        gib = p.total_memory / 2 ** 30
        share = f"1/{count} of host memory" if count > 1 else "host memory"
        print(f"Device {device}:")
        print(f"  name                 {p.name}")
        print(f"  compute capability   {p.compute_capability[0]}.{p.compute_capability[1]} (reported)")
        print(f"  multiprocessors      {p.multiprocessor_count} (worker threads)")
        print(f"  memory               {gib:.1f} GiB ({share}, one address space)")
        print(f"  warp size            {p.warp_size}")
        print(f"  max threads/block    {p.max_threads_per_block}")
        print(f"  shared memory/block  {p.shared_memory_per_block // 1024} KiB "
              f"({p.shared_memory_per_block_optin // 1024} KiB opt-in)")
    if count > 1:
        print(f"peer access            every device to every other (ANYCUDA_DEVICES={count})")
    print(f"code generation        LLVM {'.'.join(map(str, llvm.llvm_version_info))} "
          f"(llvmlite {llvmlite.__version__}) for {target_description()}")
    print(f"CUDA C++ compiler      {compiler_description()}")
    for line in shim_description():
        print(line)
    print(f"numpy                  {numpy.__version__}")
    return 0


def shim_description() -> list:
    """`anycuda info`'s lines on libcuda.so.1: which build is used and why the one built at install
    is not, when it is not."""
    from .shim.build import shim_state
    from .shim.libraries import LIBRARIES
    folder, how, why = shim_state()
    libraries = [f"CUDA libraries         {', '.join(lib.sonames[0] for lib in LIBRARIES)} (anycuda's own; "
                 f"anycuda run puts them before NVIDIA's)"]
    if how == "install":
        return [f"libcuda.so.1           built at install into {folder}"] + libraries
    if how == "cache":
        lines = [f"libcuda.so.1           built on first use into the cache {folder}"]
    else:
        lines = [f"libcuda.so.1           not built yet (anycuda run or anycuda shim-path builds it into {folder})"]
    return lines + [f"                       not the build at install: {why}"] + libraries


def cmd_demo(args) -> int:
    from .demo import main
    return main(args.names, args.list)


def cmd_shim_path(args) -> int:
    from .shim.build import shim_dir
    print(shim_dir())
    return 0


def _program_site_folders(command) -> list:
    """The site-packages of the program when it is a Python interpreter (of any environment):
    where its own NVIDIA wheels (NVRTC) are."""
    import os
    import shutil
    import subprocess
    program = shutil.which(command[0])
    if not os.path.basename(command[0]).startswith("python") or program is None:
        return []
    if os.path.dirname(os.path.abspath(program)) == os.path.dirname(os.path.abspath(sys.executable)):
        return []                           # anycuda's own environment (its bin/), searched already
    try:
        out = subprocess.run([program, "-c", "import site; print(*site.getsitepackages(), sep=chr(10))"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in out.stdout.splitlines() if line] if out.returncode == 0 else []


def _ptxas_standin() -> str:
    """The path of anycuda's ptxas (a script beside this interpreter, installed with anycuda)."""
    import os
    import shutil
    beside = os.path.join(os.path.dirname(sys.executable), "anycuda-ptxas")
    return beside if os.path.exists(beside) else (shutil.which("anycuda-ptxas") or beside)


def _sanitizer_settings(args, env) -> str:
    """The sanitizer's options as the environment the program's process reads
    (runtime/sanitizer.py); what is wrong with them, or '' when nothing is."""
    from .compiler.ops import memcheck
    if args.sanitize is None:
        if args.leak_check or args.error_exitcode is not None:
            return "--leak-check and --error-exitcode go with --sanitize"
        return ""
    settings = {"ANYCUDA_SANITIZE": args.sanitize, "ANYCUDA_SANITIZE_LEAK_CHECK": args.leak_check or "no",
                "ANYCUDA_SANITIZE_ERROR_EXITCODE": args.error_exitcode, "ANYCUDA_SANITIZE_PRINT_LIMIT": args.print_limit}
    env.update({name: str(value) for name, value in settings.items() if value is not None})
    try:
        memcheck.mode(env["ANYCUDA_SANITIZE"])
    except ValueError as e:
        return str(e).replace("ANYCUDA_SANITIZE=", "--sanitize=")
    print(f"========= anycuda sanitizer: {args.sanitize}", file=sys.stderr)
    return ""


def cmd_run(args) -> int:
    """Run a program with anycuda's libcuda.so.1 first on the loader path."""
    import os
    import sysconfig

    from .shim.build import _module_paths, shim_dir
    from .shim.libraries import PRELOADED
    from .shim.standins import NVJITLINK_STANDINS, NVRTC_STANDINS, nvrtc_folders
    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        print("usage: anycuda run -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    env = dict(os.environ)
    if args.profile or args.profile_output:
        env["ANYCUDA_PROFILE"] = "1"        # runtime/profile.py: the summary on stderr at exit
    if args.profile_output:
        env["ANYCUDA_PROFILE_OUTPUT"] = os.path.abspath(args.profile_output)
    if args.launch_timeout is not None:
        env["ANYCUDA_LAUNCH_TIMEOUT"] = repr(args.launch_timeout)   # (runtime/watchdog.py names a bad one)
    why = _sanitizer_settings(args, env)
    if why:
        print(f"anycuda run: {why}", file=sys.stderr)
        return 2
    # where the library's embedded interpreter finds anycuda and its dependencies: this environment
    env["ANYCUDA_PYTHONPATH"] = os.pathsep.join(_module_paths())
    paths = [str(shim_dir())] + [p for p in (sysconfig.get_config_var("LIBDIR"),) if p]
    if env.get("LD_LIBRARY_PATH"):
        paths.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(paths)
    preload = []

    def replaced(tool):                     # ANYCUDA_<tool>=1 (or keep) leaves NVIDIA's in charge
        return env.get(f"ANYCUDA_{tool}", "") not in ("1", "keep")
    if replaced("NVJITLINK"):
        # numba-cuda and cuda.core then link PTX through our cuLink* instead of producing machine
        # code with NVIDIA's nvJitLink; ANYCUDA_NVJITLINK=1 keeps nvJitLink
        preload += [os.path.join(paths[0], name) for name in NVJITLINK_STANDINS]
    if replaced("NVRTC"):
        # NVRTC asked for a cubin then gives a container of PTX; ANYCUDA_NVRTC=1 keeps NVIDIA's NVRTC as it is
        preload += [os.path.join(paths[0], name) for name in NVRTC_STANDINS]
        folders = nvrtc_folders() + nvrtc_folders(_program_site_folders(command))
        if env.get("ANYCUDA_NVRTC_DIRS"):
            folders.insert(0, env["ANYCUDA_NVRTC_DIRS"])
        env["ANYCUDA_NVRTC_DIRS"] = os.pathsep.join(dict.fromkeys(folders))
    if replaced("LIBRARIES"):
        # a program linked against NVIDIA's cuBLAS (or loading it, as CuPy does) gets anycuda's,
        # whether or not NVIDIA's is installed; ANYCUDA_LIBRARIES=1 keeps NVIDIA's. (libcufftw is
        # found on LD_LIBRARY_PATH instead: preloaded, its FFTW names would replace a real FFTW's)
        preload += [os.path.join(paths[0], name) for name in PRELOADED]
        # anycuda's NCCL calls MPI from its streams' threads while the program calls it from its
        # own: ask the MPI library for MPI_THREAD_MULTIPLE even when the program's MPI_Init does not
        # (Open MPI's and MPICH's variables; one the user set stays)
        env.setdefault("OMPI_MPI_THREAD_LEVEL", "3")
        env.setdefault("MPIR_CVAR_DEFAULT_THREAD_LEVEL", "MPI_THREAD_MULTIPLE")
    if replaced("PTXAS"):
        # Triton assembles its PTX with the ptxas it is told of: anycuda's keeps the PTX
        env["TRITON_PTXAS_PATH"] = _ptxas_standin()
    if env.get("LD_PRELOAD"):
        preload.append(env["LD_PRELOAD"])
    if preload:
        env["LD_PRELOAD"] = " ".join(preload)
    try:
        os.execvpe(command[0], command, env)
    except OSError as e:
        print(f"anycuda run: cannot run {command[0]}: {e}", file=sys.stderr)
        return 127


def main(argv=None) -> int:
    from . import __version__
    parser = argparse.ArgumentParser(prog="anycuda", description="Run CUDA programs without an NVIDIA GPU.")
    parser.add_argument("--version", action="version", version=f"anycuda {__version__}")
    sub = parser.add_subparsers(dest="command")
    p_info = sub.add_parser("info", help="show the devices anycuda provides")
    p_info.set_defaults(func=cmd_info)
    p_demo = sub.add_parser("demo", help="run the bundled CUDA examples on this CPU and check them")
    p_demo.add_argument("names", nargs="*", help="examples to run (default: all)")
    p_demo.add_argument("--list", action="store_true", help="list the examples")
    p_demo.set_defaults(func=cmd_demo)
    p_shim = sub.add_parser("shim-path", help="print the folder holding the libcuda.so.1 in use (built at install, else on first use)")
    p_shim.set_defaults(func=cmd_shim_path)
    p_run = sub.add_parser("run", help="run a program with anycuda's libcuda.so.1: anycuda run -- PROGRAM ARGS")
    p_run.add_argument("--sanitize", metavar="TOOL",
                       help="check every memory access of every kernel (memcheck), report reads of memory "
                       "never written (initcheck), shared-memory races (racecheck) or barriers and warp collectives used "
                       "under divergence or with wrong member masks (synccheck), as compute-sanitizer does")
    p_run.add_argument("--leak-check", choices=("full", "no"), help="with --sanitize: report device memory "
                       "still allocated at exit")
    p_run.add_argument("--error-exitcode", type=int, metavar="N", help="with --sanitize: the exit status when "
                       "errors were found")
    p_run.add_argument("--print-limit", type=int, metavar="N", help="with --sanitize: reports printed per launch")
    p_run.add_argument("--profile", action="store_true", help="at exit, print on stderr per kernel and library "
                       "call: launches, time run, blocks/s, compile times, strategy (as nsys's kernel summary)")
    p_run.add_argument("--profile-output", metavar="FILE", help="with or without --profile: also write the "
                       "profile as CSV to FILE")
    p_run.add_argument("--launch-timeout", type=float, metavar="SECONDS", help="stop a launch that runs longer "
                       "and fail it with cudaErrorLaunchTimeout, as a GPU's watchdog does (ANYCUDA_LAUNCH_TIMEOUT)")
    p_run.add_argument("command_line", nargs=argparse.REMAINDER)
    p_run.set_defaults(func=cmd_run)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
