"""SB3's logger without the empty folder: what every txrl learner's ``learn`` sets up.

Without ``tensorboard_log`` SB3's ``configure_logger`` logs to stdout or nowhere, yet
creates an empty ``SB3-<date>`` folder in the temp dir (or under ``SB3_LOGDIR``) on every
``learn``; `FolderlessLogging` gives the same outputs from a logger with no folder.
"""

from __future__ import annotations

import sys
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import HumanOutputFormat, Logger
from stable_baselines3.common.type_aliases import MaybeCallback


class FolderlessLogging(BaseAlgorithm):
    """Mixin (before the SB3 algorithm in the bases) whose ``_setup_learn`` configures a
    folderless logger when nothing would be written to a folder (no ``tensorboard_log``);
    a logger set with ``set_logger`` is kept as is."""

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, Any]:
        folderless = not self._custom_logger and self.tensorboard_log is None
        if folderless:
            self._logger = folderless_logger(self.verbose)
            self._custom_logger = True  # SB3 keeps a custom logger rather than configure one
        try:
            return super()._setup_learn(
                total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar
            )
        finally:
            if folderless:
                self._custom_logger = False


def folderless_logger(verbose: int) -> Logger:
    """What SB3's ``configure_logger`` gives without TensorBoard (stdout when ``verbose >= 1``,
    no output otherwise), without the folder it would create for files never written."""
    return Logger(
        folder=None, output_formats=[HumanOutputFormat(sys.stdout)] if verbose >= 1 else []
    )


__all__ = ["FolderlessLogging", "folderless_logger"]
