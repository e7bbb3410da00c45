"""The run layer: one training run in its directory, from its config to its final checkpoint,
and the evaluation of what it left.

One module per job, each importing only those below it (pyproject.toml's import contracts
hold them to that order):

* `txrl.run.train`: the entry point, [`train`][txrl.run.train.train]: the preflight,
  the lock, the agent recipe (`txrl.agents.recipe`, which wires the modules below);
* `txrl.run.callbacks`: the SB3 callbacks that drive a run from inside the learner's
  loop (evaluations and checkpoints between rollouts, progress, a clean stop);
* `txrl.run.preflight`: the checks of a config that build a backbone, make an env or
  ask torch, run before anything is written;
* `txrl.run.run_dir`: the run directory (`Run`): its layout,
  resume and periodic evaluation;
* [`txrl.run.evaluate`][txrl.run.evaluate]: evaluating a model or a checkpoint;
* [`txrl.run.algorithms`][txrl.run.algorithms]: the algorithm class of each learner (imported from the path
  its record names), its constructor's arguments and the policy it builds;
* `txrl.run.envs`: the training, eval and restored envs of a run;
* [`txrl.run.checkpoint`][txrl.run.checkpoint]: the checkpoint format.
* `txrl.run.run_files`: the run directory's files, read without torch (the eval log,
  the finished record, the lock), which ``txrl compare`` and the results scripts read.
"""
