"""Which training process this is, read from the launcher's variables; the one-process trap.

Environments are given as mappings (never the test's own ``os.environ``),
and every launcher's variable names are taken from the module, so a
launcher added there is checked here too. Two real processes under
``accelerate launch`` are ``test_train_distributed.py``.
"""

from __future__ import annotations

import pytest

from pacore_graph.errors import PaCoReError
from pacore_graph.rl.processes import (
    _RANK_VARS,
    _WORLD_VARS,
    LaunchError,
    Processes,
    check_launch,
    current_processes,
)

TRAP = {"ACCELERATE_USE_CPU": "true", "MASTER_ADDR": "127.0.0.1"}


def test_alone_is_rank_0_of_1_and_main() -> None:
    alone = current_processes({})
    assert alone == Processes(rank=0, world=1) and alone.is_main


@pytest.mark.parametrize(("world_var", "rank_var"), list(zip(_WORLD_VARS, _RANK_VARS, strict=True)))
def test_each_launchers_variables_give_rank_and_world(world_var: str, rank_var: str) -> None:
    got = current_processes({world_var: "4", rank_var: "3"})
    assert got == Processes(rank=3, world=4) and not got.is_main


def test_the_first_launchers_variable_wins() -> None:
    env = {name: str(2 + i) for i, name in enumerate(_WORLD_VARS)}
    assert current_processes(env).world == 2


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WORLD_SIZE": "0"}, Processes(rank=0, world=1)),  # at least one process
        ({"WORLD_SIZE": "2", "RANK": "5"}, Processes(rank=1, world=2)),  # rank inside the world
        ({"WORLD_SIZE": "2", "RANK": "-1"}, Processes(rank=0, world=2)),
        ({"WORLD_SIZE": "two", "RANK": "x"}, Processes(rank=0, world=1)),  # not numbers: unset
    ],
)
def test_odd_values_are_brought_into_range(env: dict[str, str], expected: Processes) -> None:
    assert current_processes(env) == expected


def test_the_one_process_trap_is_refused_with_the_command_that_works() -> None:
    with pytest.raises(LaunchError) as caught:
        check_launch(TRAP)
    message = str(caught.value)
    assert "--multi_gpu --num_processes N" in message and "\n" not in message
    assert isinstance(caught.value, PaCoReError)  # pacore train's exit 2: tests/cli/test_rl.py


@pytest.mark.parametrize(
    "extra",
    [{"WORLD_SIZE": "2", "RANK": "0"}, {"LOCAL_RANK": "0"}, {"ACCELERATE_USE_CPU": "false"}],
)
def test_a_launch_that_did_start_its_ranks_or_is_not_on_cpu_passes(
    extra: dict[str, str],
) -> None:
    env = {**TRAP, **extra}
    assert check_launch(env) == current_processes(env)


def test_without_master_addr_one_cpu_process_is_just_one_process() -> None:
    assert check_launch({"ACCELERATE_USE_CPU": "1"}) == Processes()
