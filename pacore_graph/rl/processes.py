"""Which training process this is: rank and world size, read from the launcher's variables.

``pacore train`` runs as one process or as several under a launcher
(``accelerate launch``, ``torchrun``, ``deepspeed``), which say who each
process is through environment variables; TRL and accelerate set up the
process group from them. This module reads the same variables so that only
the main process prints the summary and writes the log, and so that one
trap is caught before anything loads:

``accelerate launch --cpu --num_processes 2`` starts **one** process.
accelerate's CPU launcher leaves several CPU processes to ``mpirun`` (it
sets ``MASTER_ADDR`` and waits for MPI to start the ranks), so without
``mpirun`` the run silently trains on one process while the user asked for
two. That launch is refused with the command that does start N processes
on one machine: ``accelerate launch --multi_gpu --num_processes N`` (torchrun
underneath) with ``pacore train --cpu``, which accelerate runs over gloo.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pacore_graph.errors import PaCoReError

__all__ = ["LaunchError", "Processes", "check_launch", "current_processes"]

#: Variables that give the number of processes: torchrun's, then MPI's (as accelerate reads them).
_WORLD_VARS = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
_RANK_VARS = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")
_TRUE = ("1", "true", "yes")


class LaunchError(PaCoReError):
    """The launch cannot give what it asked for (refused before anything loads)."""


@dataclass(frozen=True, slots=True)
class Processes:
    """This process's rank among ``world`` training processes (0 of 1 when alone)."""

    rank: int = 0
    world: int = 1

    @property
    def is_main(self) -> bool:
        """The one process that prints and writes what the run did."""
        return self.rank == 0


def _first_int(env: Mapping[str, str], names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = env.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return default


def current_processes(env: Mapping[str, str] | None = None) -> Processes:
    """Rank and world size from the launcher's variables (``os.environ`` by default)."""
    env = os.environ if env is None else env
    world = max(1, _first_int(env, _WORLD_VARS, 1))
    rank = min(max(0, _first_int(env, _RANK_VARS, 0)), world - 1)
    return Processes(rank=rank, world=world)


def check_launch(env: Mapping[str, str] | None = None) -> Processes:
    """This process's :class:`Processes`, or :class:`LaunchError` for the one-process trap.

    The trap's signature: accelerate's CPU launcher ran us
    (``ACCELERATE_USE_CPU`` true) and set ``MASTER_ADDR``, which it does only
    for more than one process or machine, yet no launcher variable gives a
    world size: nobody started the other ranks.
    """
    env = os.environ if env is None else env
    processes = current_processes(env)
    on_cpu = env.get("ACCELERATE_USE_CPU", "").strip().lower() in _TRUE
    if (
        on_cpu
        and "MASTER_ADDR" in env
        and processes.world == 1
        and not any(name in env for name in (*_WORLD_VARS, "LOCAL_RANK"))
    ):
        raise LaunchError(
            "accelerate launch --cpu with --num_processes > 1 starts one process (accelerate "
            "leaves several CPU processes to mpirun); on one machine run "
            "'accelerate launch --multi_gpu --num_processes N -m pacore_graph.cli train ... --cpu' "
            "(torchrun underneath, gloo on the CPU) or 'torchrun --nproc_per_node N'"
        )
    return processes
