"""The started sampler process: ``python -m tf_mobileperf.sampling.worker``, its settings on stdin.

It exists as its own small module so that the first thing the new
interpreter does, before it imports anything, is ignore SIGINT and SIGTERM
(they are the trainer's to handle; see ``child._become_sampler``) and
unblock the signals the trainer's thread had blocked (the watchdog waits for
SIGALRM); then it takes the trainer's ``sys.path``, so that the sensors
unpickle from the same modules.
``child.SamplerProcess.spawn`` starts it; ``child.run_spawned`` is its life.
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_SETMASK, ())  # exec keeps the mask of the trainer's thread that started it

import os  # noqa: E402
import pickle  # noqa: E402
import sys  # noqa: E402


def main() -> int:
    """Reads the settings from stdin, takes the trainer's ``sys.path``, runs ``child.run_spawned``; its exit status."""
    settings = pickle.loads(sys.stdin.buffer.read())  # a dict of plain values: no module of ours needed yet
    sys.path[:] = settings["sys_path"]
    from tf_mobileperf.sampling.child import run_spawned

    return run_spawned(settings, settings["ring_fd"], settings["death_fd"], settings["status_fd"])


if __name__ == "__main__":
    code = 1
    try:
        code = main()
    except BaseException:
        import logging

        logging.getLogger("tf_mobileperf.sampling").exception("mobileperf: the sampler process failed")
    finally:
        os._exit(code)  # like the forked child: no exit hooks, no final garbage collection of sensor threads
