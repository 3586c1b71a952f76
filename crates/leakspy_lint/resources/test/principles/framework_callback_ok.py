# The same callbacks, each clearing what it keeps when the rollout or the epoch ends: the
# lists hold one rollout's or one epoch's entries.
import numpy as np
from skorch.callbacks import Callback
from stable_baselines3.common.callbacks import BaseCallback


class ObservationKeeper(BaseCallback):
    def __init__(self):
        super().__init__()
        self.observations = []

    def _on_step(self):
        self.observations.append(np.array(self.locals["new_obs"]))
        return True

    def _on_rollout_end(self):
        np.save("rollout.npy", np.stack(self.observations))
        self.observations.clear()


class BatchKeeper(Callback):
    def initialize(self):
        self.batches = []
        return self

    def on_batch_end(self, net, batch=None, training=None, **kwargs):
        self.batches.append(np.asarray(batch[0]))

    def on_epoch_end(self, net, **kwargs):
        self.batches = []
