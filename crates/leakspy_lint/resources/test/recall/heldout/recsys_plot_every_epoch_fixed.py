"""An example script for a recommender trained with WMRB loss: after every epoch it fits one more
epoch, computes recall at k, and plots the curves so far, run top to bottom. Each epoch opens a
new pyplot figure and saves it; none is closed, and after hundreds of epochs the bitmap
allocation fails.

Source: jfkirk/tensorrec issue #89, "Fail to allocate bitmap with plot_movielens" (1,000 epochs
of plot_movielens): take the figure out of the loop and clear it, or close it, per epoch.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch

torch.manual_seed(0)
n_users, n_items, dim = 943, 1682, 32
interactions = (torch.rand(n_users, n_items) < 0.05).float()
user_emb = torch.nn.Parameter(torch.randn(n_users, dim) * 0.1)
item_emb = torch.nn.Parameter(torch.randn(n_items, dim) * 0.1)
optimizer = torch.optim.Adam([user_emb, item_emb], lr=0.01)

epochs = 1000
results = []
for epoch in range(epochs):
    scores = user_emb @ item_emb.T
    pos = scores[interactions.bool()]
    neg = scores[~interactions.bool()][torch.randint(0, int((~interactions.bool()).sum()), (pos.numel(),))]
    loss = torch.nn.functional.softplus(neg - pos).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        top = (user_emb @ item_emb.T).topk(10, dim=1).indices
        recall_at_10 = interactions.gather(1, top).sum(1).div(interactions.sum(1).clamp_min(1)).mean().item()
    results.append(recall_at_10)
    plt.figure()
    plt.plot(np.arange(len(results)), results, label="recall@10")
    plt.xlabel("epoch")
    plt.legend()
    plt.savefig("recall_at_10.png")
    plt.close()
