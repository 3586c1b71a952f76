# Gradient accumulation: a call that steps the optimizer once, after counted rounds of
# micro-batches that only backpropagate, is one training step; the total it makes afresh keeps
# that step's micro-batches only, whether it is returned or not.
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, accumulate_every):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.scaler = torch.cuda.amp.GradScaler()
        self.accumulate_every = accumulate_every

    def train_step(self, x):
        total_loss = 0
        for _ in range(self.accumulate_every):
            loss = self.model(x).pow(2).mean() / self.accumulate_every
            total_loss += loss
            self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad()
        return total_loss


trainer = Trainer(nn.Linear(4, 1), 4)
for i in range(1000):
    loss = trainer.train_step(torch.randn(8, 4))
    print(f"loss: {loss.item():.2f}")
