"""Learner parts shared by the algorithms: rollout storage with memory streams, losses."""
