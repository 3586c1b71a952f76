# A dict's entries keep their own values when one of them is rebound (`out["loss"] /= n` style
# updates) and when branches build it with different keys: the loss entry carries the graph,
# the batch size does not.
import torch.nn.functional as F


class LossTracker:
    def __init__(self):
        self.total = 0
        self.count = 0

    def update(self, value, n):
        self.total += value * n  # expect: LS001
        self.count += n


class Trainer:
    def __init__(self, model, accum):
        self.model = model
        self.accum = accum
        self.tracker = LossTracker()

    def batch_loss(self, x, y, extra):
        loss = F.mse_loss(self.model(x), y)
        if extra:
            return {"loss": loss, "batch_size": y.size(0), "outputs": None}
        return {"loss": loss, "batch_size": y.size(0)}

    def train(self, loader, opt, extra=True):
        for x, y in loader:
            out = self.batch_loss(x, y, extra)
            out["loss"] = out["loss"] / self.accum
            out["loss"].backward()
            opt.step()
            self.tracker.update(out["loss"], out["batch_size"])
