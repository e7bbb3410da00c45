"""Suite-wide settings."""

import torch

# Tests run two workers on two cores: one thread each avoids oversubscription, which makes
# the small per-step tensor ops of acting far slower.
torch.set_num_threads(1)
