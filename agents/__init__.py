"""Agent recipes, installed as ``txrl.agents``: readable wiring, no networks or losses.

* `txrl.agents.recipe`: one training run of any learner (``algo``) with any memory
  model (``policy.backbone``): GTrXL-PPO, GTrXL-V-MPO, LSTM-PPO, RecurrentPPO, ...

``txrl train`` and ``txrl compare`` hand it to [`txrl.run.train.train`][txrl.run.train.train], which runs it
under the run directory's lock. It wires the run layer's modules and sits between them and
that entry (``recipes-between-train-and-the-run-layer`` in pyproject.toml's contracts).
"""
