"""The processes ``physprobe.run.parallel.launch`` starts: ``python -m physprobe.run.launched --launch ARGS`` runs
``accelerate launch`` with ARGS (``launcher_main``: a rank's failure stated in one line), and every rank it
starts runs ``python -m physprobe.run.launched`` (``rank_main``: the spec it was handed, scored, its errors as the
command line's one line). Apart from ``physprobe.run.parallel`` so that the helpers the runner uses import neither
the runner nor the command line.
"""

from __future__ import annotations

import os
import signal
import sys

from physprobe.run.parallel import ERROR, SPEC


def launcher_main(arguments: list[str]) -> int:
    """``accelerate launch`` with ``arguments``, whose failure is one line: a rank that fails ends the launch with
    torch's ``ChildFailedError``, which is stated as the rank that died and how (not torch's traceback and report)."""
    import logging

    from accelerate.commands.launch import launch_command, launch_command_parser
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    logging.getLogger("torch.distributed").setLevel(logging.CRITICAL)  # the elastic agent's failure report
    parsed = launch_command_parser().parse_args(arguments)
    try:
        launch_command(parsed)
    except ChildFailedError as error:
        # The first to fail: torchrun ends the other ranks with SIGTERM once one has failed, in the same second.
        rank, failure = min(
            error.failures.items(), key=lambda item: (item[1].exitcode == -signal.SIGTERM, item[1].timestamp, item[0])
        )
        code = failure.exitcode
        how = f"was killed by signal {-code} ({signal.strsignal(-code)})" if code < 0 else f"ended with exit status {code}"
        print(f"{ERROR}process {rank} of {parsed.num_processes} {how}; score again with the same --out: the run resumes "
              "from what the processes' caches hold", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def rank_main() -> int:
    """A rank of ``launch``: score the spec it was handed (JSON, ``RunSpec.from_json``), errors as the command line's
    one line."""
    from physprobe.exit_status import handled
    from physprobe.record.spec import RunSpec
    from physprobe.run import runner

    def score() -> int:
        runner.run(RunSpec.from_json(os.environ[SPEC], f"${SPEC}"))
        return 0

    return handled(score, "score")


if __name__ == "__main__":
    sys.exit(launcher_main(sys.argv[2:]) if sys.argv[1:2] == ["--launch"] else rank_main())
