"""Agent recipes, installed as ``txrl.agents``: readable wiring, no networks or losses.

* :mod:`txrl.agents.recipe`: one training run of any learner (``algo``) with any memory
  model (``policy.backbone``): GTrXL-PPO, GTrXL-V-MPO, LSTM-PPO, RecurrentPPO, ...

``txrl train`` and ``txrl compare`` call it through :func:`txrl.run.train.train`.
"""
