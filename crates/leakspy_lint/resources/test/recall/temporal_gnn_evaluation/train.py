"""Traffic forecasting with a recurrent graph convolution (in the style of PyTorch Geometric
Temporal): evaluation runs the model over every snapshot of the test signal, carrying the hidden
state from one snapshot to the next with autograd on and no backward, so the chain of graphs grows
with the number of snapshots and RAM runs out.

Source: benedekrozemberczki/pytorch_geometric_temporal issue #159, "Extreme RAM consumption by
multilayer models"; the maintainers' answer: "during evaluation, you could use `with
torch.no_grad()`". Fix: evaluate under `torch.no_grad()`.
"""

import torch

from models.recurrent_gcn import RecurrentGCN


def train(model, train_dataset, epochs=200):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for epoch in range(epochs):
        cost = 0
        h = None
        for time, snapshot in enumerate(train_dataset):
            y_hat, h = model(snapshot.x, snapshot.edge_index, snapshot.edge_attr, h)
            cost = cost + torch.mean((y_hat - snapshot.y) ** 2)
        cost = cost / (time + 1)
        cost.backward()
        optimizer.step()
        optimizer.zero_grad()


def evaluate(model, test_dataset):
    model.eval()
    cost = 0.0
    h = None
    for time, snapshot in enumerate(test_dataset):
        y_hat, h = model(snapshot.x, snapshot.edge_index, snapshot.edge_attr, h)  # expect: LS008|LS009|any
        cost += torch.mean((y_hat - snapshot.y) ** 2).item()
    return cost / (time + 1)


if __name__ == "__main__":
    from torch_geometric_temporal.dataset import ChickenpoxDatasetLoader
    from torch_geometric_temporal.signal import temporal_signal_split

    dataset = ChickenpoxDatasetLoader().get_dataset(lags=4)
    train_dataset, test_dataset = temporal_signal_split(dataset, train_ratio=0.8)
    model = RecurrentGCN(node_features=4, hidden=32, layers=4)
    train(model, train_dataset)
    print("MSE: {:.4f}".format(evaluate(model, test_dataset)))
