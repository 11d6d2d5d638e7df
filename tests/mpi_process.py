"""What each process of an MPI test launch (tests/nccl_mpi_*.py under mpirun) arms first, so that a
failure ends the launch with its cause printed rather than leaving it to the test's time limit:

- a process still running after STUCK_SECONDS is stuck: every thread's stack goes to stderr
  (which the test prints) and the process ends;
- an error a process does not catch aborts every process (the others would wait in MPI for it).
"""
import faulthandler
import sys

STUCK_SECONDS = 200          # below the tests' 300 s limit on the whole launch

faulthandler.dump_traceback_later(STUCK_SECONDS, exit=True)


def abort_every_process_on_error(MPI) -> None:
    def abort(kind, value, tb):
        sys.__excepthook__(kind, value, tb)
        MPI.COMM_WORLD.Abort(1)
    sys.excepthook = abort
