"""Agent recipes: one readable file per agent family, each ``main(config) -> TrainResult``.

* :mod:`txrl.agents.ppo_gtrxl`: PPO on GTrXL, TrXL-I, TrXL or any transformer backbone;
* :mod:`txrl.agents.ppo_lstm`: PPO on the LSTM / GRU baselines;
* :mod:`txrl.agents.vmpo_gtrxl`: V-MPO on GTrXL (or any backbone).

They wire parts of ``txrl`` together and define no networks or losses of their own;
``txrl train`` picks the recipe from the config (:func:`txrl.train.recipe`).
"""
