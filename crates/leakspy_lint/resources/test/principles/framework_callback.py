# A callback a framework drives through its per-step hook and keeps for the whole run: the
# framework never touches the attributes the subclass adds, so what the hook appends stays
# until training ends, like a LightningModule's own lists.
import numpy as np
from skorch.callbacks import Callback
from stable_baselines3.common.callbacks import BaseCallback


class ObservationKeeper(BaseCallback):
    def __init__(self):
        super().__init__()
        self.observations = []

    def _on_step(self):
        self.observations.append(np.array(self.locals["new_obs"]))  # expect: LS014
        return True


class BatchKeeper(Callback):
    def initialize(self):
        self.batches = []
        return self

    def on_batch_end(self, net, batch=None, training=None, **kwargs):
        self.batches.append(np.asarray(batch[0]))  # expect: LS014
