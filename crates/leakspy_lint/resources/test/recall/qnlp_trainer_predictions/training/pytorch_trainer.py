"""The PyTorch backend of the trainer."""

import torch

from training.trainer import Trainer


class PytorchTrainer(Trainer):
    def __init__(self, model, loss_function, epochs, optimizer=torch.optim.AdamW, learning_rate=1e-3,
                 device=-1, **kwargs):
        super().__init__(model, loss_function, epochs, **kwargs)
        self.device = torch.device("cpu" if device < 0 else f"cuda:{device}")
        self.optimizer = optimizer(self.model.parameters(), lr=learning_rate)
        self.model.to(self.device)

    def validation_step(self, batch):
        x, y = batch
        with torch.no_grad():
            y_hat = self.model(x)
            loss = self.loss_function(y_hat, y.to(self.device))
        return y_hat, loss.item()

    def training_step(self, batch):
        x, y = batch
        y_hat = self.model(x)
        loss = self.loss_function(y_hat, y.to(self.device))
        self.train_costs.append(loss.item())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return y_hat, loss.item()
