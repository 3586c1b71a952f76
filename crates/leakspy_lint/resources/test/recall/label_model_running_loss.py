"""A weak-supervision label model (a generative model over labeling-function votes) fits its
parameters with Adam; the epoch's loss is summed into `running_loss` without `.item()`, so the
sum keeps every batch's graph until the epoch ends.

Source: BatsResearch/labelmodels issue #4, "Memory leak in training loop" (GPU memory grows per
step until the process dies). Fix: `running_loss += loss.item()`.
"""

import logging

import torch
import torch.nn as nn


class LabelModel(nn.Module):
    def __init__(self, num_classes, num_lfs, init_acc=0.9):
        super().__init__()
        self.num_classes = num_classes
        self.accuracy = nn.Parameter(torch.full((num_lfs,), init_acc).logit())
        self.propensity = nn.Parameter(torch.zeros(num_lfs))
        self.class_balance = nn.Parameter(torch.zeros(num_classes))

    def forward(self, votes):
        acc = torch.sigmoid(self.accuracy)
        prop = torch.sigmoid(self.propensity)
        voted = (votes > 0).float()
        agree = votes.unsqueeze(1) == torch.arange(1, self.num_classes + 1).view(1, -1, 1)
        per_class = voted.unsqueeze(1) * prop * torch.where(agree, acc, (1 - acc) / (self.num_classes - 1))
        per_class = per_class + (1 - voted.unsqueeze(1)) * (1 - prop)
        log_lik = per_class.clamp_min(1e-9).log().sum(2) + torch.log_softmax(self.class_balance, 0)
        return torch.logsumexp(log_lik, 1)

    def estimate_label_model(self, votes, epochs=5, batch_size=64, lr=0.01):
        optimizer = torch.optim.Adam(self.parameters(), lr=lr)
        batches = torch.split(votes, batch_size)
        for epoch in range(epochs):
            running_loss = 0.0
            for batch in batches:
                optimizer.zero_grad()
                loss = -self(batch).mean()
                loss.backward()
                optimizer.step()
                running_loss += loss  # expect: LS001|LS011
            logging.info("epoch %d: loss %.4f", epoch, running_loss / len(batches))


if __name__ == "__main__":
    votes = torch.randint(0, 4, (2048, 10))
    LabelModel(num_classes=3, num_lfs=10).estimate_label_model(votes)
