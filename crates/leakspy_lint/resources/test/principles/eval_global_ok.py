# A notebook's evaluation pass collects the test set's predictions in module globals and
# concatenates them for its metrics: what a loop that trains nothing collects and reads
# afterwards is its result, at module level as in a function.
import numpy as np
import torch

model = torch.nn.Linear(8, 1)
test_loader = [(torch.rand(4, 8), torch.rand(4, 1)) for _ in range(10)]

trues, preds = [], []
with torch.no_grad():
    for x, y in test_loader:
        out = model(x)
        trues.append(y.cpu().numpy())
        preds.append(out.cpu().numpy())

trues = np.concatenate(trues)
preds = np.concatenate(preds)
print(((trues - preds) ** 2).mean())
