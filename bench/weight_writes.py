"""What noticing writes through ``p.data`` costs the acting paths (a measurement script).

A write through ``p.data`` (an EMA, a weight perturbation, SB3's ``polyak_update``) changes
no version counter, so the checks of what an acting step derives from the weights (the
column-major replica, the attention's fused weights and positional keys) cannot see it.
Two defences, timed here against what they protect:

* ``predict`` compares a sample of the parameters each call
  (:func:`txrl.nn.acting.sample.parameters_rewritten`): its cost per call against a whole
  ``predict``, and, for comparison, what deriving everything anew at each call would add;
* a rollout start drops everything derived (``txrl.sb3.algorithm``): the first acting step
  after an update (an optimizer step, seen by the derived weights' checks, so the step
  derives them anew anyway) with the drop and without it; and, for a rollout that follows
  no update, the first step after the drop against a step that reuses what was derived,
  that extra against the rollout's acting steps.

    python bench/weight_writes.py
    python bench/weight_writes.py --repeats 100    # quicker, noisier

bench/throughput.py's bench setup (GTrXL 3 x 128, M = 64, 8 envs, n_steps 128), one torch
thread, medians; the two sides of each figure are timed in alternating blocks of calls.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from throughput import build, paired_seconds, predict, txrl_act  # bench/ is sys.path[0]

from txrl.nn.acting.sample import parameters_rewritten


def cpu_name() -> str:
    """The CPU's model name, as ``lscpu`` prints it."""
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def after(timed: tuple[Any, int], *first: Callable[[], Any]) -> tuple[Any, int]:
    """``timed``'s call, each of ``first`` called before it."""
    call, warmup = timed

    def preceded() -> None:
        for before in first:
            before()
        call()

    return preceded, warmup


def optimizer_step() -> Callable[[], None]:
    """An optimizer step on a parameter of its own: what the derived weights' checks see of
    an update (every optimizer step in the process counts), at no cost of its own."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    return optimizer.step


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=300, help="timed calls per figure")
    parser.add_argument("--n-envs", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    setup = argparse.Namespace(
        n_envs=args.n_envs, length=20, n_steps=128, batch_size=256, n_epochs=4, segment_length=32
    )
    model = build("txrl", "bench", setup)
    policy = model.policy
    n = args.repeats
    print(f"{cpu_name()}, torch {torch.__version__}, 1 thread, {args.n_envs} envs")

    check = (lambda: parameters_rewritten(policy), 20)
    check_s, predict_s = paired_seconds((check, predict(model)), n)
    print(f"predict                                    {predict_s * 1e3:8.3f} ms")
    print(
        f"  its parameter sample check                {check_s * 1e6:8.1f} us"
        f"  ({check_s / predict_s:.1%} of predict)"
    )
    drop = policy.on_parameters_changed
    rederived_s, plain_s = paired_seconds((after(predict(model), drop), predict(model)), n)
    print(
        f"  deriving everything anew each call instead {(rederived_s - plain_s) * 1e3:7.3f} ms"
        f"  ({(rederived_s - plain_s) / plain_s:.1%} of predict)"
    )

    update = optimizer_step()
    dropped_s, updated_s = paired_seconds(
        (after(txrl_act(model), update, drop), after(txrl_act(model), update)), n
    )
    print(f"first acting step after an update          {updated_s * 1e3:8.3f} ms")
    print(f"  the same after an update and a drop        {dropped_s * 1e3:8.3f} ms")
    first_s, step_s = paired_seconds((after(txrl_act(model), drop), txrl_act(model)), n)
    rollout_s = setup.n_steps * step_s
    print(f"acting step (policy.act)                   {step_s * 1e3:8.3f} ms")
    print(
        f"  first step after a drop, with no update   {(first_s - step_s) * 1e3:8.3f} ms more"
        f"  ({(first_s - step_s) / rollout_s:.2%} of a rollout's {setup.n_steps} acting steps)"
    )


if __name__ == "__main__":
    main()
