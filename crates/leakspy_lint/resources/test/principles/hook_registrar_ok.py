# A method that registers hooks runs when they are set up, not each time they fire: the lists
# hold a few functions for the life of the trainer.
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, opt, distributed=False):
        self.model = model
        self.opt = opt
        self.before_epoch_hooks = []
        self.after_epoch_hooks = []
        if distributed:
            self.register_after_epoch_hook(torch.cuda.synchronize)

    def register_before_epoch_hook(self, hook):
        self.before_epoch_hooks.append(hook)

    def register_after_epoch_hook(self, hook):
        self.after_epoch_hooks.append(hook)

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for hook in self.before_epoch_hooks:
                hook(self)
            for x, y in loader:
                loss = nn.functional.mse_loss(self.model(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            for hook in self.after_epoch_hooks:
                hook(self)


def main(model, loader, epochs):
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
    trainer.register_before_epoch_hook(lambda t: t.model.train())
    trainer.fit(loader, epochs)
